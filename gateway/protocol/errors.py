"""S3 protocol errors and the one table that maps every typed error to S3 code + status.

Storage errors come from :mod:`backends.core.errors`; errors that only exist on the wire
(authentication, malformed requests) are defined here. ``s3_error_for`` is the only place
an exception becomes an S3 ``(code, status, message)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import formatdate

from backends.core import errors as se
from backends.core.base import ObjectInfo
from backends.core.errors import StorageError


class VersionIsDeleteMarker(StorageError):
    """The specified method is not allowed against this resource."""

    def __init__(self, bucket: str, key: str, version_id: str,
                 last_modified: float) -> None:
        super().__init__(resource=f"{bucket}/{key}")
        self.response_headers = {"x-amz-delete-marker": "true",
                                 "x-amz-version-id": version_id, "allow": "DELETE",
                                 "last-modified": formatdate(last_modified, usegmt=True)}


class NotModified(StorageError):
    """Not Modified."""

    def __init__(self, info: ObjectInfo | None = None) -> None:
        super().__init__()
        self.info = info  # the object the condition was evaluated on (its 304 headers)


class SourceIsDeleteMarker(StorageError):
    """The source of a copy request may not specifically refer to a delete marker by
    version id."""


class ProtocolError(StorageError):
    """Base of errors that exist only in the S3 wire protocol."""


class AccessDenied(ProtocolError):
    """Access Denied."""


class SignatureDoesNotMatch(ProtocolError):
    """The request signature we calculated does not match the signature you provided. Check your key and signing method."""


class InvalidAccessKeyId(ProtocolError):
    """The AWS access key Id you provided does not exist in our records."""


class RequestTimeTooSkewed(ProtocolError):
    """The difference between the request time and the current time is too large."""


class ExpiredPresignedRequest(ProtocolError):
    """Request has expired."""


class AuthorizationHeaderMalformed(ProtocolError):
    """The authorization header is malformed."""


class AuthorizationQueryParametersError(ProtocolError):
    """Error parsing the X-Amz-Credential parameter."""


class MissingSecurityHeader(ProtocolError):
    """Your request is missing a required header."""


class XAmzContentSHA256Mismatch(ProtocolError):
    """The provided 'x-amz-content-sha256' header does not match what was computed."""


class InvalidArgument(ProtocolError):
    """Invalid Argument."""


class InvalidRequest(ProtocolError):
    """Invalid Request."""


class MalformedXML(ProtocolError):
    """The XML you provided was not well-formed or did not validate against our published schema."""


class MissingContentLength(ProtocolError):
    """You must provide the Content-Length HTTP header."""


class MethodNotAllowed(ProtocolError):
    """The specified method is not allowed against this resource."""


class NotImplementedOperation(ProtocolError):
    """A header or query you provided implies functionality that is not implemented."""


class InvalidTag(ProtocolError):
    """The tag provided was not a valid tag."""


class NoSuchTagSet(ProtocolError):
    """The TagSet does not exist."""


class InternalError(ProtocolError):
    """We encountered an internal error. Please try again."""


class RequestTimeout(ProtocolError):
    """Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed."""


class RequestHeaderSectionTooLarge(ProtocolError):
    """Your request header section exceeds the maximum allowed size."""


@dataclass(frozen=True, slots=True)
class S3ErrorSpec:
    code: str
    status: int


_TABLE: dict[type[BaseException], S3ErrorSpec] = {
    # storage
    se.NoSuchBucket: S3ErrorSpec("NoSuchBucket", 404),
    se.BucketAlreadyOwnedByYou: S3ErrorSpec("BucketAlreadyOwnedByYou", 409),
    se.BucketNotEmpty: S3ErrorSpec("BucketNotEmpty", 409),
    se.InvalidBucketName: S3ErrorSpec("InvalidBucketName", 400),
    se.NoSuchKey: S3ErrorSpec("NoSuchKey", 404),
    se.InvalidKey: S3ErrorSpec("InvalidArgument", 400),
    se.KeyTooLong: S3ErrorSpec("KeyTooLongError", 400),
    se.NoSuchUpload: S3ErrorSpec("NoSuchUpload", 404),
    se.InvalidPart: S3ErrorSpec("InvalidPart", 400),
    se.InvalidPartOrder: S3ErrorSpec("InvalidPartOrder", 400),
    se.EntityTooSmall: S3ErrorSpec("EntityTooSmall", 400),
    se.EntityTooLarge: S3ErrorSpec("EntityTooLarge", 400),
    se.IncompleteBody: S3ErrorSpec("IncompleteBody", 400),
    se.BadDigest: S3ErrorSpec("BadDigest", 400),
    se.InvalidDigest: S3ErrorSpec("InvalidDigest", 400),
    se.PreconditionFailed: S3ErrorSpec("PreconditionFailed", 412),
    NotModified: S3ErrorSpec("NotModified", 304),
    se.InvalidRange: S3ErrorSpec("InvalidRange", 416),
    se.ConditionalRequestConflict: S3ErrorSpec("ConditionalRequestConflict", 409),
    se.SlowDown: S3ErrorSpec("SlowDown", 503),
    se.ServiceUnavailable: S3ErrorSpec("ServiceUnavailable", 503),
    se.BackendError: S3ErrorSpec("InternalError", 500),
    se.NotImplementedByBackend: S3ErrorSpec("NotImplemented", 501),
    # protocol
    AccessDenied: S3ErrorSpec("AccessDenied", 403),
    SignatureDoesNotMatch: S3ErrorSpec("SignatureDoesNotMatch", 403),
    InvalidAccessKeyId: S3ErrorSpec("InvalidAccessKeyId", 403),
    RequestTimeTooSkewed: S3ErrorSpec("RequestTimeTooSkewed", 403),
    ExpiredPresignedRequest: S3ErrorSpec("AccessDenied", 403),
    AuthorizationHeaderMalformed: S3ErrorSpec("AuthorizationHeaderMalformed", 400),
    AuthorizationQueryParametersError: S3ErrorSpec("AuthorizationQueryParametersError", 400),
    MissingSecurityHeader: S3ErrorSpec("MissingSecurityHeader", 400),
    XAmzContentSHA256Mismatch: S3ErrorSpec("XAmzContentSHA256Mismatch", 400),
    InvalidArgument: S3ErrorSpec("InvalidArgument", 400),
    InvalidRequest: S3ErrorSpec("InvalidRequest", 400),
    MalformedXML: S3ErrorSpec("MalformedXML", 400),
    MissingContentLength: S3ErrorSpec("MissingContentLength", 411),
    MethodNotAllowed: S3ErrorSpec("MethodNotAllowed", 405),
    NotImplementedOperation: S3ErrorSpec("NotImplemented", 501),
    InvalidTag: S3ErrorSpec("InvalidTag", 400),
    NoSuchTagSet: S3ErrorSpec("NoSuchTagSet", 404),
    InternalError: S3ErrorSpec("InternalError", 500),
    # refused by the HTTP protocol before the application (gateway.http.limits)
    RequestTimeout: S3ErrorSpec("RequestTimeout", 400),
    RequestHeaderSectionTooLarge: S3ErrorSpec("RequestHeaderSectionTooLarge", 400),
}

_INTERNAL = S3ErrorSpec("InternalError", 500)


#: what a client reads of a failure on the server's side: S3's words, never paths or the
#: text of an internal exception (the detail goes to the log, see :func:`is_internal`)
_INTERNAL_MESSAGES = {500: InternalError.__doc__ or "InternalError",
                      503: "Please reduce your request rate."}


def is_internal(exc: BaseException, spec: S3ErrorSpec) -> bool:
    """Whether ``exc`` is a failure on the server's side whose message is not for the
    client (a 500 or 503 not marked ``public``)."""
    return spec.status in _INTERNAL_MESSAGES and not getattr(exc, "public", False)


def s3_error_for(exc: BaseException) -> tuple[S3ErrorSpec, str]:
    """The S3 code/status and message for ``exc`` (InternalError for anything unknown);
    a failure on the server's side gets a fixed message (:func:`is_internal`)."""
    for cls in type(exc).__mro__:
        spec = _TABLE.get(cls)
        if spec is not None:
            if is_internal(exc, spec):
                return spec, _INTERNAL_MESSAGES[spec.status]
            message = exc.message if isinstance(exc, StorageError) else str(exc)
            return spec, message
    return _INTERNAL, _INTERNAL_MESSAGES[500]


class MetadataTooLarge(ProtocolError):
    """Your metadata headers exceed the maximum allowed metadata size."""


class InvalidCopySource(ProtocolError):
    """Copy Source must mention the source bucket and key: sourcebucket/sourcekey."""


class MalformedPartNumber(ProtocolError):
    """Part number must be an integer between 1 and 10000, inclusive."""


class MalformedTrailerError(ProtocolError):
    """The request contained trailing data that was not well-formed or did not conform to our published schema."""


class NoSuchCORSConfiguration(ProtocolError):
    """The CORS configuration does not exist."""


class CORSForbidden(ProtocolError):
    """CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."""


class BadRequest(ProtocolError):
    """Bad Request."""


class NoSuchLifecycleConfiguration(ProtocolError):
    """The lifecycle configuration does not exist."""


class MalformedPolicy(ProtocolError):
    """Policies must be valid JSON and the first byte must be '{'"""


class NoSuchBucketPolicy(ProtocolError):
    """The bucket policy does not exist"""


_TABLE.update({
    MalformedPolicy: S3ErrorSpec("MalformedPolicy", 400),
    NoSuchBucketPolicy: S3ErrorSpec("NoSuchBucketPolicy", 404),
    NoSuchCORSConfiguration: S3ErrorSpec("NoSuchCORSConfiguration", 404),
    CORSForbidden: S3ErrorSpec("AccessForbidden", 403),
    BadRequest: S3ErrorSpec("BadRequest", 400),
    NoSuchLifecycleConfiguration: S3ErrorSpec("NoSuchLifecycleConfiguration", 404),
    se.NoSuchVersion: S3ErrorSpec("NoSuchVersion", 404),
    se.InvalidWriteOffset: S3ErrorSpec("InvalidWriteOffset", 400),
    se.InvalidRequestForObject: S3ErrorSpec("InvalidRequest", 400),
    se.InvalidVersionId: S3ErrorSpec("InvalidArgument", 400),
    VersionIsDeleteMarker: S3ErrorSpec("MethodNotAllowed", 405),
    SourceIsDeleteMarker: S3ErrorSpec("InvalidRequest", 400),
    MalformedTrailerError: S3ErrorSpec("MalformedTrailerError", 400),
    MetadataTooLarge: S3ErrorSpec("MetadataTooLarge", 400),
    InvalidCopySource: S3ErrorSpec("InvalidArgument", 400),
    MalformedPartNumber: S3ErrorSpec("InvalidArgument", 400),
})


# -- ownership, ACLs, public access block ------------------------------------------------


class MalformedACLError(ProtocolError):
    """The XML you provided was not well-formed or did not validate against our published schema."""


class AccessControlListNotSupported(ProtocolError):
    """The bucket does not allow ACLs"""


class InvalidBucketAclWithObjectOwnership(ProtocolError):
    """Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"""


class OwnershipControlsNotFoundError(ProtocolError):
    """The bucket ownership controls were not found"""


class NoSuchPublicAccessBlockConfiguration(ProtocolError):
    """The public access block configuration was not found"""


class UnresolvableGrantByEmailAddress(ProtocolError):
    """The email address you provided does not match any account on record."""


class BucketAlreadyExists(ProtocolError):
    """The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again."""


_TABLE.update({
    MalformedACLError: S3ErrorSpec("MalformedACLError", 400),
    AccessControlListNotSupported: S3ErrorSpec("AccessControlListNotSupported", 400),
    InvalidBucketAclWithObjectOwnership: S3ErrorSpec("InvalidBucketAclWithObjectOwnership",
                                                     400),
    OwnershipControlsNotFoundError: S3ErrorSpec("OwnershipControlsNotFoundError", 404),
    NoSuchPublicAccessBlockConfiguration: S3ErrorSpec("NoSuchPublicAccessBlockConfiguration",
                                                      404),
    UnresolvableGrantByEmailAddress: S3ErrorSpec("UnresolvableGrantByEmailAddress", 400),
    BucketAlreadyExists: S3ErrorSpec("BucketAlreadyExists", 409),
})


# --- browser uploads (POST Object with a policy document) -----------------------------------


class MalformedPOSTRequest(ProtocolError):
    """The body of your POST request is not well-formed multipart/form-data."""


class MaxPostPreDataLengthExceeded(ProtocolError):
    """Your POST request fields preceding the upload file were too large."""


class InvalidPolicyDocument(ProtocolError):
    """The content of the form does not meet the conditions specified in the policy document."""


class PreconditionFailedPost(ProtocolError):
    """Bucket POST must be of the enclosure-type multipart/form-data"""


_TABLE.update({
    MalformedPOSTRequest: S3ErrorSpec("MalformedPOSTRequest", 400),
    MaxPostPreDataLengthExceeded: S3ErrorSpec("MaxPostPreDataLengthExceededError", 400),
    InvalidPolicyDocument: S3ErrorSpec("InvalidPolicyDocument", 400),
    PreconditionFailedPost: S3ErrorSpec("PreconditionFailed", 412),
})


class InvalidRedirectLocation(ProtocolError):
    """The website redirect location must have a prefix of 'http://' or 'https://' or '/'."""


class InvalidStorageClass(ProtocolError):
    """The storage class you specified is not valid"""


_TABLE.update({
    InvalidRedirectLocation: S3ErrorSpec("InvalidRedirectLocation", 400),
    InvalidStorageClass: S3ErrorSpec("InvalidStorageClass", 400),
})
