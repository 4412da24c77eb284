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

variable "webhooks_json" {
  description = "`admitfn render -p <policies_dir> --url https://admitfn.invalid -o json` saved to a file. The default is the example bundle's, kept current by a test: render your own bundle's when you change policies_dir."
  type        = string
  default     = "../webhooks.json"
}

variable "webhook_timeout_seconds" {
  description = "timeoutSeconds the webhooks were rendered with (-timeout, 10 by default)."
  type        = number
  default     = 10
}
