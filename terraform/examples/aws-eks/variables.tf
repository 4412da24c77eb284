variable "region" {
  description = "AWS region of the cluster and the function."
  type        = string
}

variable "cluster_name" {
  description = "Name of the existing EKS cluster."
  type        = string
}

variable "policies_dir" {
  description = "The policy bundle you push (checked here, published with `admitfn push`)."
  type        = string
  default     = "../../../policies/examples"
}

variable "lambda_zip" {
  description = "The deployment package from `make lambda`."
  type        = string
  default     = "../../../dist/lambda/admitfn-arm64.zip"
}

variable "webhooks" {
  description = "Apply the webhook configurations `admitfn push` published with the bundle. false on the first apply, which makes the bucket the first push publishes to."
  type        = bool
  default     = true
}

variable "webhooks_json" {
  description = "The webhook configurations `admitfn push` published, as JSON; null reads them from the bucket. To apply those of a bundle pushed to a directory: file(\"DIR/.admitfn/webhooks.json\")."
  type        = string
  default     = null
}

variable "policy_prefix" {
  description = "Key prefix of the bundle in the bucket."
  type        = string
  default     = "admitfn"
}

variable "webhook_timeout_seconds" {
  description = "timeoutSeconds the webhooks were rendered with (--timeout, 10 by default)."
  type        = number
  default     = 10
}

variable "cluster_access" {
  description = "Let the function read this cluster (docs/cluster.md, \"Reading the cluster\"): namespaceObject, the authorizer and params from the cluster. It serves the cluster on its own URLs, reads it with EKS tokens of its role (an access entry maps the role to the group admitfn-readers), and the reader ClusterRole (docs/cluster-rbac.yaml) is bound to it."
  type        = bool
  default     = false
}
