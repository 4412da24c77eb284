output "webhook_base_url" {
  description = "Base URL of the webhooks, path token included: pass it to the webhook module (or `admitfn render --url`). Secret: whoever has it can call the function."
  value       = "${trimsuffix(google_cloudfunctions2_function.this.url, "/")}/${local.active_token}"
  sensitive   = true
}

output "function_uri" {
  description = "The function's URL, without the token: requests to it without a token get a 404 Status."
  value       = google_cloudfunctions2_function.this.url
}

output "function_name" {
  description = "Name of the function."
  value       = google_cloudfunctions2_function.this.name
}

output "service_account_email" {
  description = "Email of the function's service account: the one the module created, or service_account_email. With cluster access, bind it (kind User) to the reader ClusterRole in each GKE cluster the function reads."
  value       = local.service_account_email
}

output "policies_location" {
  description = "Where the function reads its bundle (ADMITFN_POLICIES): `admitfn push --to` this to publish without Terraform."
  value       = local.location
}

output "bucket_name" {
  description = "Name of the policy bucket."
  value       = local.bucket
}
