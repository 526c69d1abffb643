//! AWS credentials from the standard chain (`aws-config`: environment,
//! profile, SSO, web identity / IRSA, container and instance metadata). The
//! same identity signs the bronze and dq_error requests (through
//! `object_store`) and the Iceberg FileIO. No credential is ever read from a
//! config file.

use std::sync::Arc;

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_credential_types::Credentials;
use aws_credential_types::credential_feature::AwsCredentialFeature;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};

use crate::config::plan::S3Settings;
use crate::error::{Error, Result};

/// The region used when neither the config nor the AWS chain names one.
pub(crate) const DEFAULT_REGION: &str = "us-east-1";

/// The resolved AWS chain: a refreshing credentials provider and a region.
#[derive(Debug, Clone)]
pub(crate) struct AwsChain {
    provider: SharedCredentialsProvider,
    /// The region requests are signed for.
    pub region: String,
}

impl AwsChain {
    /// Loads the standard chain; `settings.region` wins over the chain's region.
    pub(crate) async fn load(settings: &S3Settings) -> Result<AwsChain> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &settings.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        let config = loader.load().await;
        let provider = config
            .credentials_provider()
            .ok_or_else(|| missing_credentials("no credentials provider"))?;
        let region = config
            .region()
            .map_or_else(|| DEFAULT_REGION.to_string(), |r| r.to_string());
        Ok(AwsChain { provider, region })
    }

    /// Current credentials (refreshed by the provider when they expire).
    pub(crate) async fn credentials(&self) -> Result<Credentials> {
        self.provider
            .provide_credentials()
            .await
            .map_err(credentials_error)
    }

    /// The chain's credentials provider (for the AWS SDK's own clients).
    pub(crate) fn provider(&self) -> SharedCredentialsProvider {
        self.provider.clone()
    }

    /// Where the chain found its credentials and how long they hold, for a
    /// person: never a key or the secret.
    pub(crate) async fn describe_source(&self) -> Result<String> {
        let credentials = self.credentials().await?;
        let source = credentials
            .get_property::<Vec<AwsCredentialFeature>>()
            .and_then(|features| features.iter().filter_map(source_name).min())
            .map_or("the standard chain (source not reported)", |(_, name)| name);
        let expiry = match credentials.expiry() {
            None => "no expiry".to_string(),
            Some(at) => match at.duration_since(std::time::SystemTime::now()) {
                Ok(left) => format!("expire in {} min", left.as_secs() / 60),
                Err(_) => "expired".to_string(),
            },
        };
        Ok(format!("from {source}, region {}, {expiry}", self.region))
    }

    /// The chain as an `object_store` credential provider.
    pub(crate) fn object_store_provider(&self) -> Arc<ObjectStoreCredentials> {
        Arc::new(ObjectStoreCredentials(self.provider.clone()))
    }
}

/// The credential source a feature of resolved credentials names (the AWS
/// SDK marks credentials with the providers that produced them; a role
/// assumed from a profile carries both), ranked: the most specific first.
fn source_name(feature: &AwsCredentialFeature) -> Option<(u8, &'static str)> {
    use AwsCredentialFeature as F;
    Some(match feature {
        F::CredentialsEnvVarsStsWebIdToken
        | F::CredentialsStsAssumeRoleWebId
        | F::CredentialsProfileStsWebIdToken => {
            (0, "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, IRSA)")
        }
        F::CredentialsSso | F::CredentialsProfileSso => (1, "SSO"),
        F::CredentialsProcess | F::CredentialsProfileProcess => (2, "a credential_process"),
        F::CredentialsImds => (3, "instance metadata (IMDS)"),
        F::CredentialsHttp => (
            4,
            "the container credentials endpoint (ECS, EKS Pod Identity)",
        ),
        F::CredentialsStsAssumeRole | F::CredentialsProfileSourceProfile => (5, "an assumed role"),
        F::CredentialsEnvVars => (6, "the environment (AWS_ACCESS_KEY_ID)"),
        F::CredentialsProfile | F::CredentialsProfileNamedProvider => {
            (7, "a profile (AWS_PROFILE, ~/.aws)")
        }
        _ => return None,
    })
}

/// None found or a misconfigured source is the user's to fix (exit 2); a
/// source that timed out or failed (instance metadata, STS) may answer a
/// retry (exit 3).
fn credentials_error(error: aws_credential_types::provider::error::CredentialsError) -> Error {
    use aws_credential_types::provider::error::CredentialsError as E;
    match error {
        E::CredentialsNotLoaded(_) | E::InvalidConfiguration(_) => {
            missing_credentials(&error.to_string())
        }
        other => Error::Storage {
            op: "credentials",
            path: "the AWS credential chain".to_string(),
            source: Box::new(object_store::Error::Generic {
                store: "AWS credentials",
                source: Box::new(other),
            }),
        },
    }
}

fn missing_credentials(reason: &str) -> Error {
    Error::Usage {
        arg: "AWS credentials".to_string(),
        reason: format!(
            "none found in the standard chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity, instance metadata): {reason}"
        ),
    }
}

/// Adapts the AWS chain to `object_store`'s credential provider.
#[derive(Debug)]
pub(crate) struct ObjectStoreCredentials(SharedCredentialsProvider);

#[async_trait]
impl object_store::CredentialProvider for ObjectStoreCredentials {
    type Credential = object_store::aws::AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<Self::Credential>> {
        let credentials =
            self.0
                .provide_credentials()
                .await
                .map_err(|e| object_store::Error::Generic {
                    store: "S3",
                    source: Box::new(e),
                })?;
        Ok(Arc::new(object_store::aws::AwsCredential {
            key_id: credentials.access_key_id().to_string(),
            secret_key: credentials.secret_access_key().to_string(),
            token: credentials.session_token().map(str::to_string),
        }))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn no_credentials_is_the_users_to_fix_a_source_that_timed_out_is_retryable() {
        use aws_credential_types::provider::error::CredentialsError;
        let none = CredentialsError::not_loaded("no source");
        assert_eq!(
            credentials_error(none).class(),
            crate::error::ErrorClass::Config
        );
        let slow = CredentialsError::provider_timed_out(std::time::Duration::from_secs(5));
        assert_eq!(
            credentials_error(slow).class(),
            crate::error::ErrorClass::Infra
        );
    }

    use super::*;

    /// A chain whose credentials carry `features`, as the AWS SDK's providers mark them.
    fn chain(features: &[AwsCredentialFeature]) -> AwsChain {
        let mut credentials = Credentials::new("AKIDEXAMPLE", "the-secret", None, None, "test");
        credentials
            .get_property_mut_or_default::<Vec<AwsCredentialFeature>>()
            .extend(features.iter().cloned());
        AwsChain {
            provider: SharedCredentialsProvider::new(credentials),
            region: "eu-west-1".to_string(),
        }
    }

    #[tokio::test]
    async fn the_source_is_named_most_specific_first_and_never_the_secret() {
        use AwsCredentialFeature as F;
        let cases: [(&[AwsCredentialFeature], &str); 4] = [
            (&[F::CredentialsEnvVars], "the environment"),
            (
                &[F::CredentialsProfile, F::CredentialsStsAssumeRole],
                "an assumed role",
            ),
            (&[F::CredentialsProfileStsWebIdToken], "web identity"),
            (&[], "source not reported"),
        ];
        for (features, expected) in cases {
            let text = chain(features).describe_source().await.unwrap();
            assert!(
                text.contains(expected) && text.contains("eu-west-1"),
                "{text}"
            );
            assert!(
                !text.contains("the-secret") && !text.contains("AKIDEXAMPLE"),
                "{text}"
            );
        }
    }
}
