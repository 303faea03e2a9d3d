"""The handlers of S3's operations, a module per family (buckets, objects, multipart
uploads, ACLs and policies, CORS, lifecycle, tagging, attributes): each parses its
request, calls the service and renders S3's answer."""
