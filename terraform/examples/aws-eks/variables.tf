variable "region" {
  description = "AWS region of the cluster and the function."
  type        = string
}

variable "cluster_name" {
  description = "Name of the existing EKS cluster."
  type        = string
}

variable "policies_dir" {
  description = "The policy bundle to enforce."
  type        = string
  default     = "../../../policies/examples"
}

variable "lambda_zip" {
  description = "The deployment package from `make lambda`."
  type        = string
  default     = "../../../dist/lambda/admitfn-arm64.zip"
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
