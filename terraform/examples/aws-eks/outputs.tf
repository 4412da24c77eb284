output "lambda_function_url" {
  description = "The Function URL (the webhooks add the path token)."
  value       = module.admitfn.lambda_function_url
}

output "policies_location" {
  description = "Publish new bundles here with `admitfn push --to`."
  value       = module.admitfn.policies_location
}

output "lambda_cloudwatch_log_group_name" {
  description = "The function's CloudWatch log group."
  value       = module.admitfn.lambda_cloudwatch_log_group_name
}

output "webhook_configurations" {
  description = "The webhook configurations installed in the cluster."
  value       = concat(module.webhook.validating_configurations, module.webhook.mutating_configurations)
}
