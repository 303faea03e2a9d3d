// Command s3matrix runs the common S3 operations with the AWS SDK for Go v2 and its
// default settings (default checksums, the multipart manager, presigned URLs,
// conditional writes, ExpectedBucketOwner) against one endpoint, and prints one line per
// check. It exits non-zero when a check fails.
//
// Usage: s3matrix -endpoint http://127.0.0.1:9000 (credentials from AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, region us-east-1).
package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

const mib = 1024 * 1024

type runner struct {
	ctx      context.Context
	client   *s3.Client
	failures int
}

func (r *runner) check(name string, err error) {
	if err != nil {
		r.failures++
		fmt.Printf("FAIL %s: %v\n", name, err)
		return
	}
	fmt.Printf("ok   %s\n", name)
}

// wantCode: the call failed with the S3 error code want.
func wantCode(err error, want string) error {
	if err == nil {
		return fmt.Errorf("succeeded, want %s", want)
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == want {
		return nil
	}
	return fmt.Errorf("got %v, want %s", err, want)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

func (r *runner) get(bucket, key string, want []byte) error {
	out, err := r.client.GetObject(r.ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key,
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	got, err := io.ReadAll(out.Body)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("read %d bytes, not the %d written", len(got), len(want))
	}
	return nil
}

func main() {
	endpoint := flag.String("endpoint", "", "the S3 endpoint (http://host:port)")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "s3matrix: -endpoint is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3matrix:", err)
		os.Exit(2)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = endpoint
		o.UsePathStyle = true
	})
	r := &runner{ctx: ctx, client: client}
	bucket := fmt.Sprintf("go-matrix-%d", time.Now().UnixNano())

	buckets, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
	r.check("ListBuckets", err)
	if err != nil {
		os.Exit(1)
	}
	owner := aws.ToString(buckets.Owner.ID)
	_, err = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	r.check("CreateBucket", err)
	if err != nil {
		os.Exit(1)
	}

	// PutObject with the SDK's default checksum (CRC32, sent as a trailer or a header).
	small := randomBytes(100 * 1024)
	put, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("small"),
		Body: bytes.NewReader(small), ContentType: aws.String("application/x-test"),
		Metadata: map[string]string{"colour": "blue"}})
	if err == nil {
		sum := md5.Sum(small)
		if aws.ToString(put.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
			err = fmt.Errorf("ETag %s is not the MD5 of the body", aws.ToString(put.ETag))
		}
	}
	r.check("PutObject (default checksum)", err)
	r.check("GetObject (checksum validated)", r.get(bucket, "small", small))
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("small")})
	if err == nil && (aws.ToInt64(head.ContentLength) != int64(len(small)) ||
		head.Metadata["colour"] != "blue" || aws.ToString(head.ContentType) != "application/x-test") {
		err = fmt.Errorf("HeadObject answered %d bytes, %v, %s", aws.ToInt64(head.ContentLength),
			head.Metadata, aws.ToString(head.ContentType))
	}
	r.check("HeadObject", err)

	// An explicit SHA256 checksum, and a wrong one.
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("sha256"),
		Body: bytes.NewReader(small), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	r.check("PutObject (SHA256 checksum)", err)
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("bad-crc"),
		Body: bytes.NewReader(small), ChecksumCRC32: aws.String("AAAAAA==")})
	r.check("PutObject with a wrong CRC32 is refused", wantCode(err, "BadDigest"))

	// The multipart manager: a 12 MiB stream (not seekable) in 5 MiB parts, 3 at a time.
	big := randomBytes(12 * mib)
	uploader := manager.NewUploader(client, func(u *manager.Uploader) { u.PartSize = 5 * mib })
	_, err = uploader.Upload(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("big"),
		Body: io.MultiReader(bytes.NewReader(big))})
	r.check("manager.Uploader (multipart)", err)
	downloader := manager.NewDownloader(client, func(d *manager.Downloader) { d.PartSize = 5 * mib })
	buf := manager.NewWriteAtBuffer(make([]byte, 0, len(big)))
	_, err = downloader.Download(ctx, buf, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("big")})
	if err == nil && !bytes.Equal(buf.Bytes(), big) {
		err = errors.New("the ranged download differs from the upload")
	}
	r.check("manager.Downloader (ranged GETs)", err)
	r.check("GetObject of the multipart object", r.get(bucket, "big", big))

	// Presigned URLs, used by a plain HTTP client.
	presigner := s3.NewPresignClient(client)
	presignedPut, err := presigner.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &bucket,
		Key: aws.String("presigned")}, s3.WithPresignExpires(5*time.Minute))
	if err == nil {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, presignedPut.Method, presignedPut.URL,
			bytes.NewReader(small))
		if err == nil {
			err = doHTTP(req, http.StatusOK, nil)
		}
	}
	r.check("presigned PUT", err)
	presignedGet, err := presigner.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &bucket,
		Key: aws.String("presigned")}, s3.WithPresignExpires(5*time.Minute))
	if err == nil {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, presignedGet.URL, nil)
		if err == nil {
			err = doHTTP(req, http.StatusOK, small)
		}
	}
	r.check("presigned GET", err)

	// Conditional writes: If-None-Match: * refuses to overwrite.
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("small"),
		Body: bytes.NewReader([]byte("other")), IfNoneMatch: aws.String("*")})
	r.check("PutObject If-None-Match: * on an existing key", wantCode(err, "PreconditionFailed"))
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("fresh"),
		Body: bytes.NewReader([]byte("new")), IfNoneMatch: aws.String("*")})
	r.check("PutObject If-None-Match: * on a new key", err)

	// ExpectedBucketOwner: the right owner passes, another account is refused.
	_, err = client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("small"),
		ExpectedBucketOwner: &owner})
	r.check("HeadObject with the right ExpectedBucketOwner", err)
	_, err = client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket,
		ExpectedBucketOwner: aws.String("111122223333")})
	r.check("ListObjectsV2 with another ExpectedBucketOwner", wantCode(err, "AccessDenied"))

	// Copy, list, delete.
	_, err = client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &bucket, Key: aws.String("copy"),
		CopySource: aws.String(bucket + "/small")})
	r.check("CopyObject", err)
	r.check("GetObject of the copy", r.get(bucket, "copy", small))
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket})
	var keys []string
	if err == nil {
		for _, o := range list.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if strings.Join(keys, ",") != "big,copy,fresh,presigned,sha256,small" {
			err = fmt.Errorf("listed %v", keys)
		}
	}
	r.check("ListObjectsV2", err)
	var ids []types.ObjectIdentifier
	for _, k := range keys {
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
	}
	del, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &bucket,
		Delete: &types.Delete{Objects: ids}})
	if err == nil && (len(del.Deleted) != len(keys) || len(del.Errors) != 0) {
		err = fmt.Errorf("deleted %d, errors %d", len(del.Deleted), len(del.Errors))
	}
	r.check("DeleteObjects (default checksum of the key list)", err)
	_, err = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
	r.check("DeleteBucket", err)

	if r.failures > 0 {
		fmt.Printf("%d checks failed\n", r.failures)
		os.Exit(1)
	}
	fmt.Println("all checks passed")
}

// doHTTP sends req and checks its status (and body, when want is not nil).
func doHTTP(req *http.Request, status int, want []byte) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != status {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if want != nil && !bytes.Equal(body, want) {
		return fmt.Errorf("read %d bytes, not the %d written", len(body), len(want))
	}
	return nil
}
