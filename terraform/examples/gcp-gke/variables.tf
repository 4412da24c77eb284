variable "project_id" {
  description = "Google Cloud project of the cluster and the function."
  type        = string
}

variable "region" {
  description = "Region of the function."
  type        = string
}

variable "cluster_name" {
  description = "Name of the existing GKE cluster."
  type        = string
}

variable "cluster_location" {
  description = "Location (region or zone) of the cluster."
  type        = string
}

variable "policies_dir" {
  description = "The policy bundle to enforce."
  type        = string
  default     = "../../../policies/examples"
}

variable "source_zip" {
  description = "The Cloud Functions source from `make gcf`."
  type        = string
  default     = "../../../dist/gcf/admitfn-source.zip"
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
  description = "Let the function read this cluster (docs/cluster.md, \"Reading the cluster\"): namespaceObject, the authorizer and params from the cluster. It serves the cluster on its own URLs, reads it with its service account (cluster viewer, to authenticate), and the reader ClusterRole (docs/cluster-rbac.yaml) is bound to it."
  type        = bool
  default     = false
}
