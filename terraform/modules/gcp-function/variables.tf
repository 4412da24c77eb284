variable "project_id" {
  description = "Google Cloud project."
  type        = string
}

variable "region" {
  description = "Region of the function and, by default, of its buckets."
  type        = string
}

variable "name" {
  description = "Name of the function and its service account."
  type        = string
  default     = "admitfn"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,48}[a-z0-9]$", var.name))
    error_message = "The name must be 2 to 50 lower-case letters, digits or hyphens, starting with a letter."
  }
}

variable "source_zip" {
  description = "The Cloud Functions source on this machine, uploaded to a bucket the module makes: a release's admitfn-gcf-source_<version>.zip, or `make gcf`'s dist/gcf/admitfn-source.zip. Set this, or source_bucket and source_object."
  type        = string
  default     = null

  validation {
    condition     = var.source_zip == null ? var.source_bucket != null && var.source_object != null : endswith(var.source_zip, ".zip") && var.source_bucket == null && var.source_object == null
    error_message = "Give the source one way: source_zip, a local .zip (a release's admitfn-gcf-source_<version>.zip or make gcf's), or source_bucket and source_object, one in GCS."
  }
}

variable "source_bucket" {
  description = "GCS bucket holding the source zip (a release's, uploaded unchanged); with source_object, instead of source_zip. Cloud Build's service account must be able to read it."
  type        = string
  default     = null
}

variable "source_object" {
  description = "Name of the source zip in source_bucket. A new name redeploys the function: keep the release's file name, which carries its version."
  type        = string
  default     = null

  validation {
    condition     = var.source_object == null || endswith(coalesce(var.source_object, "x"), ".zip")
    error_message = "source_object must name a .zip: a release's admitfn-gcf-source_<version>.zip."
  }
}

variable "source_generation" {
  description = "Generation of source_object, to pin one version of it in a versioned bucket."
  type        = number
  default     = null
}

variable "runtime" {
  description = "Cloud Functions Go runtime; admitfn needs Go 1.26 or later."
  type        = string
  default     = "go126"

  validation {
    condition     = can(regex("^go1(2[6-9]|[3-9][0-9])$", var.runtime))
    error_message = "runtime must be go126 or later."
  }
}

variable "available_memory" {
  description = "Memory of each instance (Cloud Run syntax, such as 512M or 1Gi)."
  type        = string
  default     = "512M"

  validation {
    condition     = can(regex("^[0-9]+(M|Mi|G|Gi)$", var.available_memory))
    error_message = "available_memory must be a quantity such as 512M or 1Gi."
  }
}

variable "min_instance_count" {
  description = "Instances kept warm: 1 or more avoids cold starts on the API server's write path (billed while idle)."
  type        = number
  default     = 1

  validation {
    condition     = var.min_instance_count >= 0 && var.min_instance_count <= var.max_instance_count
    error_message = "min_instance_count must be between 0 and max_instance_count."
  }
}

variable "max_instance_count" {
  description = "Upper bound on instances."
  type        = number
  default     = 20

  validation {
    condition     = var.max_instance_count >= 1
    error_message = "max_instance_count must be at least 1."
  }
}

variable "webhook_timeout_seconds" {
  description = "timeoutSeconds of the webhooks that call the function (render it with the same --timeout)."
  type        = number
  default     = 10

  validation {
    condition     = var.webhook_timeout_seconds >= 1 && var.webhook_timeout_seconds <= 30
    error_message = "webhook_timeout_seconds must be between 1 and 30, as Kubernetes requires."
  }
}

variable "timeout_seconds" {
  description = "The function's request timeout. It must be below the webhook's, so a slow review answers with an error before kube-apiserver gives up."
  type        = number
  default     = 8

  validation {
    condition     = var.timeout_seconds >= 1 && var.timeout_seconds < var.webhook_timeout_seconds
    error_message = "timeout_seconds must be at least 1 and below webhook_timeout_seconds."
  }
}

variable "ingress_settings" {
  description = "Who may reach the function: ALLOW_ALL (GKE control planes call from Google's network, not your VPC), ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  type        = string
  default     = "ALLOW_ALL"

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB"], var.ingress_settings)
    error_message = "ingress_settings must be ALLOW_ALL, ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  }
}

variable "policies_dir" {
  description = "Local policy bundle directory, uploaded in the layout the function loads (manifest last)."
  type        = string

  validation {
    condition     = length([for f in fileset(var.policies_dir, "**") : f if can(regex("\\.(ya?ml|json)$", f)) && !can(regex("_test\\.ya?ml$", f)) && !can(regex("(^|/)\\.", f))]) > 0
    error_message = "The policies directory holds no policy files (.yaml, .yml or .json, not *_test.yaml, not hidden)."
  }
}

variable "create_bucket" {
  description = "Create the policy bucket (versioned, uniform access, public access prevented); false uses bucket_name as it is."
  type        = bool
  default     = true
}

variable "bucket_name" {
  description = "Name of the policy bucket: required with create_bucket = false; with true, null picks a name from the project and function."
  type        = string
  default     = null

  validation {
    condition     = var.create_bucket || var.bucket_name != null
    error_message = "bucket_name is required when create_bucket is false."
  }
}

variable "bucket_location" {
  description = "Location of the created buckets (null: the function's region)."
  type        = string
  default     = null
}

variable "policy_prefix" {
  description = "Object name prefix of the bundle in the bucket."
  type        = string
  default     = "admitfn"

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$", var.policy_prefix))
    error_message = "policy_prefix must be a relative prefix without leading, trailing or doubled slashes."
  }
}

variable "refresh_interval" {
  description = "How often the function checks for a new bundle (ADMITFN_REFRESH_INTERVAL); 0 turns checks off."
  type        = string
  default     = "30s"

  validation {
    condition     = can(regex("^(0|([0-9]+(\\.[0-9]+)?(ms|s|m|h))+)$", var.refresh_interval))
    error_message = "refresh_interval must be a Go duration such as 30s or 5m, or 0."
  }
}

variable "bundle_public_key" {
  description = "PEM ed25519 public key (from `admitfn keygen`): only bundles signed with its private key load. Bundles this module uploads are unsigned, so set it only when bundles are pushed with `admitfn push --sign-key` instead."
  type        = string
  default     = null

  validation {
    # A key setting that holds no key stops the function from starting.
    condition     = try(trimspace(var.bundle_public_key) != "", true)
    error_message = "bundle_public_key is set but holds no key: set it to the public key bundles are signed with, or leave it null to load unsigned bundles."
  }
}

variable "upload_policies" {
  description = "Upload policies_dir (false: bundles are pushed by other means, such as `admitfn push`)."
  type        = bool
  default     = true
}

variable "token_rotation" {
  description = "Increase by one to rotate the path token: a new token becomes the webhook's, the previous one stays accepted until the next rotation."
  type        = number
  default     = 0

  validation {
    condition     = var.token_rotation >= 0 && floor(var.token_rotation) == var.token_rotation
    error_message = "token_rotation must be a whole number, 0 or more."
  }
}

variable "labels" {
  description = "Labels for every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "create_service_account" {
  description = "Create the function's service account, allowed only to read the policy bucket. false runs the function as service_account_email, which needs roles/storage.objectViewer on the policy bucket."
  type        = bool
  default     = true
}

variable "service_account_email" {
  description = "An existing service account for the function: required with create_service_account = false."
  type        = string
  default     = null

  validation {
    condition     = var.create_service_account ? var.service_account_email == null : var.service_account_email != null
    error_message = "service_account_email is required with create_service_account = false, and not taken with true."
  }
}

variable "environment_variables" {
  description = "More environment variables for the function, such as ADMITFN_LOG_LEVEL; the module sets the ones its inputs name."
  type        = map(string)
  default     = {}

  validation {
    condition     = length(setintersection(keys(var.environment_variables), ["ADMITFN_POLICIES", "ADMITFN_TOKENS", "ADMITFN_REFRESH_INTERVAL", "ADMITFN_BUNDLE_PUBLIC_KEY", "GOMEMLIMIT"])) == 0
    error_message = "ADMITFN_POLICIES, ADMITFN_TOKENS, ADMITFN_REFRESH_INTERVAL, ADMITFN_BUNDLE_PUBLIC_KEY and GOMEMLIMIT come from the module's inputs, not environment_variables."
  }
}

variable "kms_key_name" {
  description = "Cloud KMS key (projects/…/cryptoKeys/…) for the buckets' default encryption and the function's build artifacts (null: Google-managed keys). The Cloud Storage and Cloud Functions service agents need roles/cloudkms.cryptoKeyEncrypterDecrypter on it."
  type        = string
  default     = null
}

variable "vpc_connector" {
  description = "Serverless VPC Access connector (projects/…/locations/…/connectors/…) for the function's outbound traffic (null: none)."
  type        = string
  default     = null
}

variable "vpc_connector_egress_settings" {
  description = "Which outbound traffic goes through vpc_connector: PRIVATE_RANGES_ONLY or ALL_TRAFFIC."
  type        = string
  default     = "PRIVATE_RANGES_ONLY"

  validation {
    condition     = contains(["PRIVATE_RANGES_ONLY", "ALL_TRAFFIC"], var.vpc_connector_egress_settings)
    error_message = "vpc_connector_egress_settings must be PRIVATE_RANGES_ONLY or ALL_TRAFFIC."
  }
}

variable "gke_access" {
  description = "Let the function's service account authenticate to the project's GKE clusters (roles/container.clusterViewer), for reading them (docs/cluster.md, \"Reading the cluster\"); what it may read is the reader ClusterRole the webhook module binds to its email (reader_subjects). Give the function the clusters in ADMITFN_CLUSTERS (environment_variables) with `gke: {}`."
  type        = bool
  default     = false
}
