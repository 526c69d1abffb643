//! AWS credentials from the standard chain (`aws-config`: environment,
//! profile, SSO, web identity / IRSA, container and instance metadata). The
//! same identity signs the bronze and dq_error requests (through
//! `object_store`) and the Iceberg FileIO. No credential is ever read from a
//! config file.

use std::sync::Arc;

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_credential_types::Credentials;
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
            .map_err(|e| missing_credentials(&e.to_string()))
    }

    /// The chain as an `object_store` credential provider.
    pub(crate) fn object_store_provider(&self) -> Arc<ObjectStoreCredentials> {
        Arc::new(ObjectStoreCredentials(self.provider.clone()))
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
