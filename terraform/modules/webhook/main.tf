# The ValidatingWebhookConfiguration and MutatingWebhookConfiguration that
# `admitfn render` computes for a bundle, one webhook per policy group,
# pointed at the function.

locals {
  validating = { for i in var.configurations.items : i.metadata.name => i if i.kind == "ValidatingWebhookConfiguration" }
  mutating   = { for i in var.configurations.items : i.metadata.name => i if i.kind == "MutatingWebhookConfiguration" }
  # A cluster's URLs carry its name, as `admitfn render --cluster` renders
  # them: how the function tells the clusters it serves apart.
  url_base = var.cluster == null ? var.base_url : "${var.base_url}/clusters/${var.cluster}"

  # With push_down, each configuration as the API object render printed,
  # its URLs and CA bundle those of this function.
  manifests = {
    for i in var.configurations.items : "${i.kind}/${i.metadata.name}" => {
      apiVersion = "admissionregistration.k8s.io/v1"
      kind       = i.kind
      metadata   = { name = i.metadata.name, labels = i.metadata.labels }
      webhooks = [for w in i.webhooks : merge(
        {
          name                    = w.name
          admissionReviewVersions = w.admissionReviewVersions
          clientConfig = merge(
            { url = "${local.url_base}${trimprefix(w.clientConfig.url, var.render_url)}" },
            var.ca_bundle != null ? { caBundle = base64encode(var.ca_bundle) } : (w.clientConfig.caBundle == null ? {} : { caBundle = w.clientConfig.caBundle }),
          )
          rules           = w.rules
          failurePolicy   = w.failurePolicy
          matchPolicy     = w.matchPolicy
          sideEffects     = w.sideEffects
          timeoutSeconds  = w.timeoutSeconds
          matchConditions = w.matchConditions
        },
        w.namespaceSelector == null ? {} : { namespaceSelector = w.namespaceSelector },
        w.objectSelector == null ? {} : { objectSelector = w.objectSelector },
        i.kind == "MutatingWebhookConfiguration" ? { reinvocationPolicy = coalesce(w.reinvocationPolicy, "Never") } : {},
      )]
    } if var.push_down
  }
}

resource "kubernetes_manifest" "this" {
  for_each = local.manifests
  manifest = each.value
}

resource "kubernetes_validating_webhook_configuration_v1" "this" {
  for_each = var.push_down ? {} : local.validating

  metadata {
    name   = each.key
    labels = each.value.metadata.labels
  }

  dynamic "webhook" {
    for_each = each.value.webhooks
    content {
      name                      = webhook.value.name
      admission_review_versions = webhook.value.admissionReviewVersions
      failure_policy            = webhook.value.failurePolicy
      match_policy              = webhook.value.matchPolicy
      side_effects              = webhook.value.sideEffects
      timeout_seconds           = webhook.value.timeoutSeconds

      client_config {
        url       = "${local.url_base}${trimprefix(webhook.value.clientConfig.url, var.render_url)}"
        ca_bundle = var.ca_bundle != null ? var.ca_bundle : (webhook.value.clientConfig.caBundle == null ? null : base64decode(webhook.value.clientConfig.caBundle))
      }

      dynamic "rule" {
        for_each = webhook.value.rules
        content {
          api_groups   = rule.value.apiGroups
          api_versions = rule.value.apiVersions
          operations   = rule.value.operations
          resources    = rule.value.resources
          scope        = rule.value.scope
        }
      }

      dynamic "namespace_selector" {
        for_each = webhook.value.namespaceSelector == null ? [] : [webhook.value.namespaceSelector]
        content {
          match_labels = namespace_selector.value.matchLabels
          dynamic "match_expressions" {
            for_each = coalesce(namespace_selector.value.matchExpressions, [])
            content {
              key      = match_expressions.value.key
              operator = match_expressions.value.operator
              values   = match_expressions.value.values
            }
          }
        }
      }

      dynamic "object_selector" {
        for_each = webhook.value.objectSelector == null ? [] : [webhook.value.objectSelector]
        content {
          match_labels = object_selector.value.matchLabels
          dynamic "match_expressions" {
            for_each = coalesce(object_selector.value.matchExpressions, [])
            content {
              key      = match_expressions.value.key
              operator = match_expressions.value.operator
              values   = match_expressions.value.values
            }
          }
        }
      }
    }
  }
}

resource "kubernetes_mutating_webhook_configuration_v1" "this" {
  for_each = var.push_down ? {} : local.mutating

  metadata {
    name   = each.key
    labels = each.value.metadata.labels
  }

  dynamic "webhook" {
    for_each = each.value.webhooks
    content {
      name                      = webhook.value.name
      admission_review_versions = webhook.value.admissionReviewVersions
      failure_policy            = webhook.value.failurePolicy
      match_policy              = webhook.value.matchPolicy
      side_effects              = webhook.value.sideEffects
      timeout_seconds           = webhook.value.timeoutSeconds
      reinvocation_policy       = coalesce(webhook.value.reinvocationPolicy, "Never")

      client_config {
        url       = "${local.url_base}${trimprefix(webhook.value.clientConfig.url, var.render_url)}"
        ca_bundle = var.ca_bundle != null ? var.ca_bundle : (webhook.value.clientConfig.caBundle == null ? null : base64decode(webhook.value.clientConfig.caBundle))
      }

      dynamic "rule" {
        for_each = webhook.value.rules
        content {
          api_groups   = rule.value.apiGroups
          api_versions = rule.value.apiVersions
          operations   = rule.value.operations
          resources    = rule.value.resources
          scope        = rule.value.scope
        }
      }

      dynamic "namespace_selector" {
        for_each = webhook.value.namespaceSelector == null ? [] : [webhook.value.namespaceSelector]
        content {
          match_labels = namespace_selector.value.matchLabels
          dynamic "match_expressions" {
            for_each = coalesce(namespace_selector.value.matchExpressions, [])
            content {
              key      = match_expressions.value.key
              operator = match_expressions.value.operator
              values   = match_expressions.value.values
            }
          }
        }
      }

      dynamic "object_selector" {
        for_each = webhook.value.objectSelector == null ? [] : [webhook.value.objectSelector]
        content {
          match_labels = object_selector.value.matchLabels
          dynamic "match_expressions" {
            for_each = coalesce(object_selector.value.matchExpressions, [])
            content {
              key      = match_expressions.value.key
              operator = match_expressions.value.operator
              values   = match_expressions.value.values
            }
          }
        }
      }
    }
  }
}

# What `admitfn apply --cluster` needs, as docs/audit-rbac.yaml grants it
# (a test holds the two equal): read the namespaces and every kind, ask the
# authorizer, and write PolicyReports.
resource "kubernetes_cluster_role_v1" "audit" {
  count = var.audit_role ? 1 : 0

  metadata {
    name   = var.audit_role_name
    labels = { "app.kubernetes.io/managed-by" = "admitfn" }
  }

  rule {
    api_groups = [""]
    resources  = ["namespaces"]
    verbs      = ["get", "list"]
  }
  rule {
    api_groups = ["*"]
    resources  = ["*"]
    verbs      = ["get", "list"]
  }
  rule {
    api_groups = ["authorization.k8s.io"]
    resources  = ["subjectaccessreviews"]
    verbs      = ["create"]
  }
  rule {
    api_groups = ["wgpolicyk8s.io"]
    resources  = ["policyreports", "clusterpolicyreports"]
    verbs      = ["get", "list", "create", "update", "patch", "delete"]
  }
}

# What a function with cluster access reads, as docs/cluster-rbac.yaml
# grants it (a test holds the two equal): namespaces, the authorizer, and
# the param kinds of reader_param_resources. Nothing it writes.
resource "kubernetes_cluster_role_v1" "reader" {
  count = var.reader_role ? 1 : 0

  metadata {
    name   = var.reader_role_name
    labels = { "app.kubernetes.io/managed-by" = "admitfn" }
  }

  rule {
    api_groups = [""]
    resources  = ["namespaces"]
    verbs      = ["get", "list", "watch"]
  }
  rule {
    api_groups = ["authorization.k8s.io"]
    resources  = ["subjectaccessreviews"]
    verbs      = ["create"]
  }
  dynamic "rule" {
    for_each = var.reader_param_resources
    content {
      api_groups = rule.value.api_groups
      resources  = rule.value.resources
      verbs      = ["get", "list", "watch"]
    }
  }
}

resource "kubernetes_cluster_role_binding_v1" "reader" {
  count = var.reader_role && length(var.reader_subjects) > 0 ? 1 : 0

  metadata {
    name   = var.reader_role_name
    labels = { "app.kubernetes.io/managed-by" = "admitfn" }
  }

  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "ClusterRole"
    name      = kubernetes_cluster_role_v1.reader[0].metadata[0].name
  }

  dynamic "subject" {
    for_each = var.reader_subjects
    content {
      kind      = subject.value.kind
      name      = subject.value.name
      namespace = subject.value.namespace
      api_group = subject.value.kind == "ServiceAccount" ? "" : "rbac.authorization.k8s.io"
    }
  }
}
