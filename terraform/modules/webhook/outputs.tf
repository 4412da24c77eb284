output "validating_configurations" {
  description = "Names of the ValidatingWebhookConfigurations."
  value       = concat(keys(kubernetes_validating_webhook_configuration_v1.this), [for k, m in local.manifests : m.metadata.name if m.kind == "ValidatingWebhookConfiguration"])
}

output "mutating_configurations" {
  description = "Names of the MutatingWebhookConfigurations."
  value       = concat(keys(kubernetes_mutating_webhook_configuration_v1.this), [for k, m in local.manifests : m.metadata.name if m.kind == "MutatingWebhookConfiguration"])
}

output "webhooks" {
  description = "Number of webhooks (policy groups) installed."
  value       = sum(concat([0], [for i in var.configurations.items : length(i.webhooks)]))
}

output "audit_role_name" {
  description = "The audit ClusterRole's name (null unless audit_role)."
  value       = var.audit_role ? kubernetes_cluster_role_v1.audit[0].metadata[0].name : null
}
