//! The settings of an S3 bucket that decide whether what silverline writes
//! there can be recovered: versioning and default encryption, read with the
//! AWS SDK (`aws-sdk-s3`) under the same identity, endpoint, region and
//! addressing as the run's storage. Used by `silverline doctor`; a run never
//! reads them.
//!
//! In: a bucket name. Out: a [`BucketSetting`] per setting, never an error:
//! a server that does not implement the call (SeaweedFS answers
//! `GetBucketEncryption` with `NotImplemented`) or a call that is refused is
//! a finding, not a failure.

use std::fmt;
use std::time::Duration;

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::config::plan::S3Settings;
use crate::infra::aws::AwsChain;

/// How long one settings call may take, retries included.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// What a bucket says of one of its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketSetting {
    /// On: how (`Enabled`, `AES256`, `aws:kms`...).
    On(String),
    /// Off: what the bucket said (never enabled, suspended, no default encryption).
    Off(String),
    /// The server does not implement the call.
    NotReported,
    /// The bucket does not exist.
    NoSuchBucket,
    /// The call failed otherwise (refused, unreachable...): why.
    Unreadable(String),
}

/// An S3 client for reading bucket settings.
#[derive(Debug, Clone)]
pub(crate) struct BucketSettings {
    client: aws_sdk_s3::Client,
}

impl BucketSettings {
    /// A client with the chain's identity and region and the storage's endpoint and addressing.
    pub(crate) fn new(aws: &AwsChain, s3: &S3Settings) -> BucketSettings {
        Self::with_identity(aws.provider(), &aws.region, s3)
    }

    fn with_identity(
        credentials: SharedCredentialsProvider,
        region: &str,
        s3: &S3Settings,
    ) -> BucketSettings {
        let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
            .operation_timeout(CALL_TIMEOUT)
            .build();
        let mut config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new(region.to_string()))
            .credentials_provider(credentials)
            .force_path_style(s3.path_style)
            .timeout_config(timeouts);
        if let Some(endpoint) = &s3.endpoint {
            config = config.endpoint_url(endpoint);
        }
        BucketSettings {
            client: aws_sdk_s3::Client::from_conf(config.build()),
        }
    }

    /// Whether `bucket` keeps the versions of overwritten and deleted objects.
    pub(crate) async fn versioning(&self, bucket: &str) -> BucketSetting {
        match self
            .client
            .get_bucket_versioning()
            .bucket(bucket)
            .send()
            .await
        {
            Ok(output) => match output.status().map(|s| s.as_str()) {
                Some("Enabled") => BucketSetting::On("Enabled".to_string()),
                Some(other) => BucketSetting::Off(other.to_string()),
                None => BucketSetting::Off("never enabled".to_string()),
            },
            Err(error) => failure(&error),
        }
    }

    /// How `bucket` encrypts new objects by default.
    pub(crate) async fn encryption(&self, bucket: &str) -> BucketSetting {
        match self
            .client
            .get_bucket_encryption()
            .bucket(bucket)
            .send()
            .await
        {
            Ok(output) => {
                let algorithms: Vec<&str> = output
                    .server_side_encryption_configuration()
                    .map(|c| c.rules())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|rule| rule.apply_server_side_encryption_by_default())
                    .map(|default| default.sse_algorithm().as_str())
                    .collect();
                if algorithms.is_empty() {
                    BucketSetting::Off("no default encryption rule".to_string())
                } else {
                    BucketSetting::On(algorithms.join(", "))
                }
            }
            Err(error) if error.code() == Some(NO_ENCRYPTION) => {
                BucketSetting::Off("no default encryption".to_string())
            }
            Err(error) => failure(&error),
        }
    }
}

/// The error code of a bucket without default encryption.
const NO_ENCRYPTION: &str = "ServerSideEncryptionConfigurationNotFoundError";

/// What a failed settings call says of the bucket.
fn failure<E>(error: &SdkError<E>) -> BucketSetting
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = error.raw_response().map(|r| r.status().as_u16());
    match (error.code(), status) {
        (Some("NoSuchBucket"), _) => BucketSetting::NoSuchBucket,
        (Some("NotImplemented"), _) | (_, Some(501)) => BucketSetting::NotReported,
        (Some(code), _) => BucketSetting::Unreadable(match error.message() {
            Some(message) => format!("{code}: {message}"),
            None => code.to_string(),
        }),
        (None, Some(status)) => BucketSetting::Unreadable(format!("HTTP status {status}")),
        (None, None) => {
            BucketSetting::Unreadable(aws_sdk_s3::error::DisplayErrorContext(error).to_string())
        }
    }
}

impl fmt::Display for BucketSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketSetting::On(how) => write!(f, "on ({how})"),
            BucketSetting::Off(why) => write!(f, "off ({why})"),
            BucketSetting::NotReported => f.write_str("not reported by the server"),
            BucketSetting::NoSuchBucket => f.write_str("the bucket does not exist"),
            BucketSetting::Unreadable(why) => write!(f, "could not be read: {why}"),
        }
    }
}

/// The bucket of an `s3://bucket/prefix` URL; `None` for any other location.
pub(crate) fn bucket_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    (parsed.scheme() == "s3")
        .then(|| parsed.host_str().map(str::to_string))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// A loopback server answering every request with `status` and an S3
    /// error document of `code`; its URL.
    fn answering(status: &'static str, code: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>m</Message></Error>"
                );
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        url
    }

    fn reader(endpoint: String) -> BucketSettings {
        let credentials = aws_credential_types::Credentials::new("k", "s", None, None, "test");
        let s3 = S3Settings {
            endpoint: Some(endpoint),
            region: None,
            path_style: true,
        };
        BucketSettings::with_identity(
            SharedCredentialsProvider::new(credentials),
            "us-east-1",
            &s3,
        )
    }

    #[tokio::test]
    async fn what_a_server_answers_is_read_as_a_setting() {
        let cases = [
            (
                "501 Not Implemented",
                "NotImplemented",
                BucketSetting::NotReported,
            ),
            ("404 Not Found", "NoSuchBucket", BucketSetting::NoSuchBucket),
            (
                "404 Not Found",
                NO_ENCRYPTION,
                BucketSetting::Off("no default encryption".to_string()),
            ),
            (
                "403 Forbidden",
                "AccessDenied",
                BucketSetting::Unreadable("AccessDenied: m".to_string()),
            ),
        ];
        for (status, code, expected) in cases {
            let settings = reader(answering(status, code));
            assert_eq!(settings.encryption("lake").await, expected, "{code}");
        }
        let settings = reader(answering("501 Not Implemented", "NotImplemented"));
        assert_eq!(
            settings.versioning("lake").await,
            BucketSetting::NotReported
        );
    }

    #[test]
    fn only_s3_urls_name_a_bucket() {
        assert_eq!(bucket_of("s3://lake/x/dq_error"), Some("lake".to_string()));
        assert_eq!(bucket_of("s3://warehouse"), Some("warehouse".to_string()));
        assert_eq!(bucket_of("file:///tmp/lake"), None);
        assert_eq!(bucket_of("my_warehouse"), None);
    }
}
