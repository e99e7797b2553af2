package controllertest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

// IsolateAWS keeps the machine's AWS settings (profiles, CA bundle,
// region, endpoints) out of a test, and the instance metadata service,
// which is not on 127.0.0.0/8, unasked.
func IsolateAWS(t testing.TB) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_CA_BUNDLE": "", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2": "",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
	} {
		t.Setenv(k, v)
	}
}

// AWSFake starts an awsfake on 127.0.0.1 at speed, whose targets may only
// be in 127.0.0.0/8, and stops it when the test ends.
func AWSFake(t testing.TB, speed float64) *awsfake.Fake {
	t.Helper()
	f, err := awsfake.New(awsfake.Options{Speed: speed, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// AWSOptions is the aws provider template for a fake at endpoint: static
// credentials, retries within milliseconds, rate limits out of the way and
// listings never reused (tests poll).
func AWSOptions(endpoint string) aws.Options {
	return aws.Options{
		Endpoint:    endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		RetryBase:   time.Millisecond,
		MaxBackoff:  10 * time.Millisecond,
		WriteRate:   1000,
		ReadRate:    1000,
		FastTTL:     time.Nanosecond,
		SlowTTL:     time.Nanosecond,
	}
}
