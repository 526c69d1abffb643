# shellcheck shell=bash
# Environment for talking to the local silverline stack started by up.sh
# (SeaweedFS `weed mini`: S3 + Iceberg REST catalog on 127.0.0.1).
#
# Usage:  source localstack/env.sh
#
# Values already set in the caller's environment win (so a different key,
# port or endpoint can be chosen by exporting it before sourcing), except the
# AWS_* credential variables: the stack accepts only its own key pair, so they
# are always derived from SILVERLINE_S3_ACCESS_KEY / SILVERLINE_S3_SECRET_KEY
# (set those to change the keys). AWS_SESSION_TOKEN and AWS_PROFILE are unset
# for the same reason: a session token from another account would be signed
# into every request and rejected.
#
# This file is sourced into interactive shells too, so it deliberately does
# not change shell options (no `set -e` etc.) and defines nothing but
# variables.

# Ports of weed mini's servers (defaults are weed's own). Each gRPC port is
# the HTTP port + 10000, so pick overrides that leave room for that.
export SILVERLINE_S3_PORT="${SILVERLINE_S3_PORT:-8333}"
export SILVERLINE_REST_PORT="${SILVERLINE_REST_PORT:-8181}"
export SILVERLINE_FILER_PORT="${SILVERLINE_FILER_PORT:-8888}"
export SILVERLINE_MASTER_PORT="${SILVERLINE_MASTER_PORT:-9333}"
export SILVERLINE_VOLUME_PORT="${SILVERLINE_VOLUME_PORT:-9340}"
export SILVERLINE_ADMIN_PORT="${SILVERLINE_ADMIN_PORT:-23646}"

# Endpoints the silverline config (config/localstack.toml) and tests use.
export SILVERLINE_S3_ENDPOINT="${SILVERLINE_S3_ENDPOINT:-http://127.0.0.1:${SILVERLINE_S3_PORT}}"
export SILVERLINE_REST_URI="${SILVERLINE_REST_URI:-http://127.0.0.1:${SILVERLINE_REST_PORT}}"
# One table bucket = one warehouse; the REST catalog is asked for it by this name.
export SILVERLINE_WAREHOUSE="${SILVERLINE_WAREHOUSE:-s3://warehouse}"

# The stack's only identity. It is also the OAuth2 client credential of the
# Iceberg REST catalog (POST /v1/oauth/tokens with client_id/client_secret).
export SILVERLINE_S3_ACCESS_KEY="${SILVERLINE_S3_ACCESS_KEY:-silverline}"
export SILVERLINE_S3_SECRET_KEY="${SILVERLINE_S3_SECRET_KEY:-silverline-secret}"
export SILVERLINE_S3_REGION="${SILVERLINE_S3_REGION:-us-east-1}"
export SILVERLINE_REST_CREDENTIAL="${SILVERLINE_REST_CREDENTIAL:-${SILVERLINE_S3_ACCESS_KEY}:${SILVERLINE_S3_SECRET_KEY}}"

# Standard AWS chain variables, for the S3 client (and aws-cli, pyiceberg...).
export AWS_ACCESS_KEY_ID="${SILVERLINE_S3_ACCESS_KEY}"
export AWS_SECRET_ACCESS_KEY="${SILVERLINE_S3_SECRET_KEY}"
export AWS_REGION="${SILVERLINE_S3_REGION}"
unset AWS_SESSION_TOKEN AWS_PROFILE
