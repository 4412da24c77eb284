output "function_uri" {
  description = "The function's URL (the webhooks add the path token)."
  value       = module.admitfn.function_uri
}

output "policies_location" {
  description = "Publish new bundles here with `admitfn push --to`."
  value       = module.admitfn.policies_location
}

output "webhook_configurations" {
  description = "The webhook configurations installed in the cluster."
  value       = concat(module.webhook.validating_configurations, module.webhook.mutating_configurations)
}
