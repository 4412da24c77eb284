# The type below is the shape of `admitfn render -o json`: a v1 List of
# webhook configurations. A Go test renders bundles and checks every field
# render emits is declared here, and everything required here is emitted, so
# the two cannot drift apart.
variable "configurations" {
  description = "The webhook configurations of the bundle: jsondecode(file(...)) of `admitfn render -p DIR --url https://admitfn.invalid -o json` (the URL is replaced by base_url)."
  type = object({
    apiVersion = string
    kind       = string
    items = list(object({
      apiVersion = string
      kind       = string
      metadata = object({
        name   = string
        labels = optional(map(string), {})
      })
      webhooks = list(object({
        name                    = string
        admissionReviewVersions = list(string)
        clientConfig = object({
          url      = string
          caBundle = optional(string)
        })
        rules = list(object({
          apiGroups   = list(string)
          apiVersions = list(string)
          operations  = list(string)
          resources   = list(string)
          scope       = optional(string, "*")
        }))
        failurePolicy = string
        matchPolicy   = string
        namespaceSelector = optional(object({
          matchLabels = optional(map(string))
          matchExpressions = optional(list(object({
            key      = string
            operator = string
            values   = optional(list(string))
          })))
        }))
        objectSelector = optional(object({
          matchLabels = optional(map(string))
          matchExpressions = optional(list(object({
            key      = string
            operator = string
            values   = optional(list(string))
          })))
        }))
        matchConditions = optional(list(object({
          name       = string
          expression = string
        })), [])
        sideEffects        = string
        timeoutSeconds     = number
        reinvocationPolicy = optional(string)
      }))
    }))
  })

  validation {
    condition     = var.configurations.kind == "List" && alltrue([for i in var.configurations.items : contains(["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"], i.kind)])
    error_message = "configurations must be the List that `admitfn render -o json` prints."
  }
}

variable "push_down" {
  description = "Install the matchConditions admitfn render pushes down, so kube-apiserver calls the function only when a policy could act (docs/cluster.md). The provider's webhook resources cannot express matchConditions (hashicorp/terraform-provider-kubernetes#2750), so they are installed as kubernetes_manifest resources, which read the cluster's API when planning: the cluster must exist then. Without, every webhook is installed without its matchConditions, as render --push-down=false renders it."
  type        = bool
  default     = false
}

variable "render_url" {
  description = "The --url the configurations were rendered with; each webhook's URL keeps its route and swaps this for base_url."
  type        = string
  default     = "https://admitfn.invalid"

  validation {
    condition     = alltrue(flatten([for i in var.configurations.items : [for w in i.webhooks : startswith(w.clientConfig.url, var.render_url)]]))
    error_message = "Every webhook URL in configurations must start with render_url: render with -url set to it."
  }
}

variable "base_url" {
  description = "Base URL of the function, path token included (the function module's webhook_base_url)."
  type        = string
  sensitive   = true

  validation {
    condition     = startswith(var.base_url, "https://") && !endswith(var.base_url, "/")
    error_message = "base_url must be an https:// URL without a trailing slash: kube-apiserver calls webhooks over HTTPS only."
  }
}

variable "ca_bundle" {
  description = "PEM CA bundle kube-apiserver should trust for the function (null: publicly trusted certificates, as Lambda and Cloud Run have, or the rendered caBundle)."
  type        = string
  default     = null
}

variable "audit_role" {
  description = "Create the ClusterRole `admitfn apply --cluster` needs to audit the cluster and write PolicyReports (docs/audit-rbac.yaml), named audit_role_name; bind it to whoever runs the audit."
  type        = bool
  default     = false
}

variable "audit_role_name" {
  description = "Name of the audit ClusterRole."
  type        = string
  default     = "admitfn-audit"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", var.audit_role_name))
    error_message = "audit_role_name must be a Kubernetes object name: lower-case letters, digits, '-' and '.'."
  }
}

variable "cluster" {
  description = "The cluster these configurations are for, one of the function's ADMITFN_CLUSTERS: the URLs carry its name (<base_url>/clusters/<cluster>/…, as `admitfn render --cluster`), and the function answers them from that cluster. null: URLs without a cluster."
  type        = string
  default     = null

  validation {
    condition     = var.cluster == null || can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.cluster))
    error_message = "cluster must be a DNS label: a-z, 0-9 and -, at most 63 characters."
  }
}

variable "reader_role" {
  description = "Create the ClusterRole a function with cluster access needs (docs/cluster-rbac.yaml), named reader_role_name, and bind it to reader_subjects."
  type        = bool
  default     = false
}

variable "reader_role_name" {
  description = "Name of the reader ClusterRole and its binding."
  type        = string
  default     = "admitfn-reader"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", var.reader_role_name))
    error_message = "reader_role_name must be a Kubernetes object name: lower-case letters, digits, '-' and '.'."
  }
}

variable "reader_param_resources" {
  description = "The param kinds the function reads from the cluster (those the bundle's bindings name and the bundle does not carry): get, list and watch on each."
  type = list(object({
    api_groups = list(string)
    resources  = list(string)
  }))
  default = [{ api_groups = [""], resources = ["configmaps"] }]
}

variable "reader_subjects" {
  description = "Who the function is in the cluster: on EKS the group its access entry names (kind Group), on GKE its service account's email (kind User), elsewhere the ServiceAccount whose token it holds (with its namespace)."
  type = list(object({
    kind      = string
    name      = string
    namespace = optional(string)
  }))
  default = []

  validation {
    condition     = alltrue([for s in var.reader_subjects : contains(["User", "Group", "ServiceAccount"], s.kind) && (s.kind != "ServiceAccount" || s.namespace != null)])
    error_message = "each reader_subjects entry is a User, a Group or a ServiceAccount (which needs its namespace)."
  }
}
