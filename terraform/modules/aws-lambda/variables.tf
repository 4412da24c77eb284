variable "name" {
  description = "Name of the function, its role and log group."
  type        = string
  default     = "admitfn"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,56}$", var.name))
    error_message = "The name must be 1 to 56 letters, digits, hyphens or underscores."
  }
}

variable "lambda_zip" {
  description = "The deployment package on this machine: a release's admitfn-lambda_<version>_arm64.zip (_amd64 with architectures = [\"x86_64\"]), or `make lambda`'s dist/lambda/admitfn-arm64.zip. Set this, or s3_bucket and s3_key."
  type        = string
  default     = null

  validation {
    condition     = var.lambda_zip == null ? var.s3_bucket != null && var.s3_key != null : endswith(var.lambda_zip, ".zip") && var.s3_bucket == null && var.s3_key == null
    error_message = "Give the deployment package one way: lambda_zip, a local .zip (a release's admitfn-lambda_<version>_<arch>.zip or make lambda's), or s3_bucket and s3_key, one in S3."
  }
}

variable "s3_bucket" {
  description = "Bucket holding the deployment package (a release's zip, uploaded unchanged), in the function's region; with s3_key, instead of lambda_zip."
  type        = string
  default     = null
}

variable "s3_key" {
  description = "Key of the deployment package in s3_bucket. A new key redeploys the function: keep the release's file name, which carries its version."
  type        = string
  default     = null

  validation {
    condition     = var.s3_key == null || endswith(coalesce(var.s3_key, "x"), ".zip")
    error_message = "s3_key must name a .zip: a release's admitfn-lambda_<version>_<arch>.zip."
  }
}

variable "s3_object_version" {
  description = "Version of the s3_key object in a versioned bucket: a new version redeploys the function under the same key."
  type        = string
  default     = null
}

variable "architectures" {
  description = "[\"arm64\"] (Graviton, the default: cheaper per millisecond) or [\"x86_64\"]; it must match the zip."
  type        = list(string)
  default     = ["arm64"]

  validation {
    condition     = length(var.architectures) == 1 && contains(["arm64", "x86_64"], var.architectures[0])
    error_message = "architectures must be [\"arm64\"] or [\"x86_64\"]."
  }
}

variable "memory_size" {
  description = "Memory in MiB; CPU grows with it. 512 MiB answers a review in a few milliseconds."
  type        = number
  default     = 512

  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240
    error_message = "memory_size must be between 128 and 10240 MiB."
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

variable "timeout" {
  description = "The function's timeout in seconds. It must be below the webhook's, so a slow review answers with an error before kube-apiserver gives up."
  type        = number
  default     = 8

  validation {
    condition     = var.timeout >= 1 && var.timeout < var.webhook_timeout_seconds
    error_message = "timeout must be at least 1 and below webhook_timeout_seconds."
  }
}

variable "reserved_concurrent_executions" {
  description = "Reserved concurrent executions: -1 leaves the function unreserved; a number both guarantees and caps its concurrency."
  type        = number
  default     = -1

  validation {
    condition     = var.reserved_concurrent_executions == -1 || var.reserved_concurrent_executions >= 1
    error_message = "reserved_concurrent_executions must be -1 (unreserved) or at least 1: 0 would stop every review."
  }
}

variable "cloudwatch_logs_retention_in_days" {
  description = "How long CloudWatch keeps the function's logs."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.cloudwatch_logs_retention_in_days)
    error_message = "cloudwatch_logs_retention_in_days must be a value CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, … 3653)."
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
  description = "Create the policy bucket (versioned, encrypted, public access blocked); false uses bucket_name as it is."
  type        = bool
  default     = true
}

variable "bucket_name" {
  description = "Name of the policy bucket: required with create_bucket = false; with true, null picks a name from the function's."
  type        = string
  default     = null

  validation {
    condition     = var.create_bucket || var.bucket_name != null
    error_message = "bucket_name is required when create_bucket is false."
  }
  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be an S3 bucket name: 3 to 63 lower-case letters, digits, dots or hyphens, starting and ending with a letter or digit."
  }
}

variable "policy_prefix" {
  description = "Key prefix of the bundle in the bucket; the function may read only under it."
  type        = string
  default     = "admitfn"

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$", var.policy_prefix))
    error_message = "policy_prefix must be a relative key prefix without leading, trailing or doubled slashes."
  }
}

variable "object_lock_days" {
  description = "With a created bucket: keep every policy object version for this many days in governance mode (0: no object lock). Object lock can only be chosen when the bucket is created."
  type        = number
  default     = 0

  validation {
    condition     = var.object_lock_days >= 0
    error_message = "object_lock_days must be 0 (off) or a number of days."
  }
}

variable "bucket_kms_key_arn" {
  description = "KMS key for the created bucket's default encryption (null: S3-managed keys). The function's role may decrypt with it."
  type        = string
  default     = null
}

variable "kms_key_arn" {
  description = "KMS key that encrypts the function's environment, which holds the path tokens (null: the Lambda service key). The function's role may decrypt with it."
  type        = string
  default     = null
}

variable "cloudwatch_logs_kms_key_id" {
  description = "KMS key ARN that encrypts the function's log group (null: CloudWatch's own encryption). Its key policy must let CloudWatch Logs use it."
  type        = string
  default     = null
}

variable "create_role" {
  description = "Create the function's role, with only what it needs (read the policy prefix, write its logs, decrypt with the given keys). false uses role_arn as it is: attach the role_policy_json output to it."
  type        = bool
  default     = true
}

variable "role_arn" {
  description = "ARN of an existing role for the function: required with create_role = false."
  type        = string
  default     = null

  validation {
    condition     = var.create_role ? var.role_arn == null : var.role_arn != null
    error_message = "role_arn is required with create_role = false, and not taken with true."
  }
}

variable "role_permissions_boundary" {
  description = "ARN of a policy to set as the permissions boundary of the role the module creates."
  type        = string
  default     = null
}

variable "environment_variables" {
  description = "More environment variables for the function, such as ADMITFN_LOG_LEVEL; the module sets the ones its inputs name."
  type        = map(string)
  default     = {}

  validation {
    condition     = length(setintersection(keys(var.environment_variables), ["ADMITFN_POLICIES", "ADMITFN_TOKENS", "ADMITFN_REFRESH_INTERVAL", "ADMITFN_BUNDLE_PUBLIC_KEY"])) == 0
    error_message = "ADMITFN_POLICIES, ADMITFN_TOKENS, ADMITFN_REFRESH_INTERVAL and ADMITFN_BUNDLE_PUBLIC_KEY come from the module's inputs, not environment_variables."
  }
}

variable "vpc_subnet_ids" {
  description = "Subnets to run the function in (null: outside any VPC). It must then reach S3 through a gateway endpoint or NAT to read its bundle."
  type        = list(string)
  default     = null
}

variable "vpc_security_group_ids" {
  description = "Security groups of the function in the VPC: set with vpc_subnet_ids."
  type        = list(string)
  default     = null

  validation {
    condition     = (var.vpc_subnet_ids == null) == (var.vpc_security_group_ids == null)
    error_message = "vpc_subnet_ids and vpc_security_group_ids go together."
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
  description = "Upload policies_dir (false: bundles are pushed by other means, such as `admitfn push`, and policies_dir is only checked)."
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

variable "tags" {
  description = "Tags for every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "eks_access" {
  description = "EKS clusters the function reads (docs/cluster.md, \"Reading the cluster\"): for each, an access entry maps the function's role to kubernetes_groups, which the webhook module's reader_subjects binds to the reader ClusterRole. Give the function the cluster in ADMITFN_CLUSTERS (environment_variables) with `eks: {clusterName: …}`."
  type = list(object({
    cluster_name      = string
    kubernetes_groups = optional(list(string), ["admitfn-readers"])
  }))
  default = []

  validation {
    condition     = alltrue([for a in var.eks_access : length(a.kubernetes_groups) > 0 && alltrue([for g in a.kubernetes_groups : !startswith(g, "system:")])])
    error_message = "each eks_access entry needs kubernetes_groups, none of them system: (EKS refuses those in access entries)."
  }
}
