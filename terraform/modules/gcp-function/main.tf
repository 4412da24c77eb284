# admitfn on Cloud Functions (2nd gen): the function invocable without a
# Google ID token (the apiserver cannot send one), protected by an
# unguessable path token; the policy bundle in Cloud Storage, uploaded in the
# layout the function loads.

locals {
  bucket_location = coalesce(var.bucket_location, var.region)
  bucket          = var.create_bucket ? google_storage_bucket.policies[0].name : var.bucket_name
  location        = "gs://${local.bucket}/${var.policy_prefix}"

  service_account_email = var.create_service_account ? google_service_account.function[0].email : var.service_account_email

  # Bucket names hold 63 characters at most: the project and function
  # names cut to leave room for the suffixes.
  bucket_stem = trimsuffix(substr("${var.project_id}-${var.name}", 0, 36), "-")

  active_token = var.token_rotation % 2 == 0 ? random_password.token_b.result : random_password.token_a.result
  other_token  = var.token_rotation % 2 == 0 ? random_password.token_a.result : random_password.token_b.result

  # The Go runtime's soft memory limit: nine tenths of the instance's memory
  # (Kubernetes quantities: M is 10^6 bytes, Mi 2^20). The function reads a
  # container's cgroup limit itself, but Cloud Run's sandbox may show none.
  memory_bytes = tonumber(regex("^[0-9]+", var.available_memory)) * { M = 1000000, Mi = 1048576, G = 1000000000, Gi = 1073741824 }[regex("[A-Za-z]+$", var.available_memory)]
  gomemlimit   = "${floor(local.memory_bytes * 0.9 / 1048576)}MiB"

  # Below 2G an instance has less than one vCPU and serves one request at a
  # time: a second P adds only the scheduler's hand-offs, paid from the same
  # share (a fifth of a warm request's CPU, BenchmarkGCFWarmRequests).
  gomaxprocs = local.memory_bytes < 2000000000 ? { GOMAXPROCS = "1" } : {}
}

resource "random_password" "token_a" {
  length  = 43
  special = false
  keepers = { generation = floor((var.token_rotation + 1) / 2) }
}

resource "random_password" "token_b" {
  length  = 43
  special = false
  keepers = { generation = floor(var.token_rotation / 2) }
}

resource "random_id" "bucket" {
  byte_length = 4
}

# --- the policy bucket

resource "google_storage_bucket" "policies" {
  count                       = var.create_bucket ? 1 : 0
  project                     = var.project_id
  name                        = coalesce(var.bucket_name, "${local.bucket_stem}-policies-${random_id.bucket.hex}")
  location                    = local.bucket_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  versioning {
    enabled = true
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }
}

module "bundle" {
  source       = "../bundle"
  policies_dir = var.policies_dir
}

resource "google_storage_bucket_object" "policy" {
  for_each     = var.upload_policies ? module.bundle.objects : {}
  bucket       = local.bucket
  name         = "${var.policy_prefix}/${each.key}"
  source       = each.value.path
  content_type = each.value.type
  # The provider compares the local file's MD5 with the object's: a new
  # generation exactly when the bytes change.
}

resource "time_static" "bundle" {
  triggers = { fingerprint = module.bundle.fingerprint }
}

resource "google_storage_bucket_object" "manifest" {
  count        = var.upload_policies ? 1 : 0
  bucket       = local.bucket
  name         = "${var.policy_prefix}/.admitfn/manifest.json"
  content_type = "application/json"
  content = jsonencode({
    manifest = {
      apiVersion = "admitfn.io/v1alpha1"
      kind       = "BundleManifest"
      created    = time_static.bundle.rfc3339
      # Serials only increase: functions refuse a manifest older than the
      # one they serve.
      serial = time_static.bundle.unix
      objects = [
        for f in module.bundle.files : {
          key     = f
          size    = module.bundle.objects[f].size
          sha256  = module.bundle.objects[f].sha256
          version = tostring(google_storage_bucket_object.policy[f].generation)
        }
      ]
    }
  })
}

# --- the function's source

resource "google_storage_bucket" "source" {
  count                       = var.source_zip == null ? 0 : 1
  project                     = var.project_id
  name                        = "${local.bucket_stem}-source-${random_id.bucket.hex}"
  location                    = local.bucket_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }
}

resource "google_storage_bucket_object" "source" {
  count  = var.source_zip == null ? 0 : 1
  bucket = google_storage_bucket.source[0].name
  # Named by content, so a new zip redeploys the function.
  name   = "admitfn-source-${filemd5(var.source_zip)}.zip"
  source = var.source_zip
}

# --- its identity: reads of the policy bucket, nothing else

resource "google_service_account" "function" {
  count        = var.create_service_account ? 1 : 0
  project      = var.project_id
  account_id   = var.name
  display_name = "admitfn function ${var.name}"
}

resource "google_storage_bucket_iam_member" "read_policies" {
  bucket = local.bucket
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${local.service_account_email}"
}

# --- the function

resource "google_cloudfunctions2_function" "this" {
  project      = var.project_id
  location     = var.region
  name         = var.name
  labels       = var.labels
  kms_key_name = var.kms_key_name

  build_config {
    runtime     = var.runtime
    entry_point = "Admitfn"
    source {
      storage_source {
        bucket     = var.source_zip == null ? var.source_bucket : google_storage_bucket.source[0].name
        object     = var.source_zip == null ? var.source_object : google_storage_bucket_object.source[0].name
        generation = var.source_generation
      }
    }
  }

  service_config {
    available_memory               = var.available_memory
    timeout_seconds                = var.timeout_seconds
    min_instance_count             = var.min_instance_count
    max_instance_count             = var.max_instance_count
    ingress_settings               = var.ingress_settings
    all_traffic_on_latest_revision = true
    service_account_email          = local.service_account_email
    vpc_connector                  = var.vpc_connector
    vpc_connector_egress_settings  = var.vpc_connector == null ? null : var.vpc_connector_egress_settings
    environment_variables = merge(
      var.environment_variables,
      {
        ADMITFN_POLICIES         = local.location
        ADMITFN_TOKENS           = "${local.active_token},${local.other_token}"
        ADMITFN_REFRESH_INTERVAL = var.refresh_interval
        GOMEMLIMIT               = local.gomemlimit
      },
      local.gomaxprocs,
      var.bundle_public_key == null ? {} : { ADMITFN_BUNDLE_PUBLIC_KEY = var.bundle_public_key },
    )
  }

  # An instance must find the bundle, and the permission to read it.
  depends_on = [google_storage_bucket_object.manifest, google_storage_bucket_iam_member.read_policies]
}

# Public invocation: the apiserver cannot send a Google ID token; the path
# token guards the reviews. An organization policy restricting allUsers
# (iam.allowedPolicyMemberDomains) must allow it for this project.
resource "google_cloud_run_service_iam_member" "public" {
  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.this.service_config[0].service
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# --- authenticating to GKE clusters (ADMITFN_CLUSTERS): cluster viewer lets
# the service account's tokens in; RBAC in each cluster (the reader
# ClusterRole) says what they may read.

resource "google_project_iam_member" "gke" {
  count   = var.gke_access ? 1 : 0
  project = var.project_id
  role    = "roles/container.clusterViewer"
  member  = "serviceAccount:${local.service_account_email}"
}
