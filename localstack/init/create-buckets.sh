#!/usr/bin/env bash
# LocalStack READY hook (mounted into /etc/localstack/init/ready.d/ by
# localstack/docker-compose.yml): creates the silverline buckets once the S3
# service accepts requests. LocalStack runs it directly, so it must stay
# executable; a non-zero exit marks the hook as failed in
# GET /_localstack/init/ready. Idempotent: existing buckets are left alone
# (they survive restarts when LocalStack persistence is enabled).
set -euo pipefail

# bronze: raw drops; lake: dq_error and other outputs; warehouse: Iceberg
# tables of the REST catalog (its CATALOG_WAREHOUSE is s3://warehouse).
BUCKETS="${SILVERLINE_BUCKETS:-bronze lake warehouse}"
REGION="${AWS_DEFAULT_REGION:-us-east-1}"

for bucket in $BUCKETS; do
  if awslocal s3api head-bucket --bucket "$bucket" --region "$REGION" >/dev/null 2>&1; then
    echo "create-buckets: s3://$bucket already exists"
  else
    awslocal s3 mb "s3://$bucket" --region "$REGION"
  fi
done
