provider "google" {
  project = var.project_id
  region  = var.region
}

data "google_client_config" "current" {}

data "google_container_cluster" "this" {
  name     = var.cluster_name
  location = var.cluster_location
}

provider "kubernetes" {
  host                   = "https://${data.google_container_cluster.this.endpoint}"
  cluster_ca_certificate = base64decode(data.google_container_cluster.this.master_auth[0].cluster_ca_certificate)
  token                  = data.google_client_config.current.access_token
}

module "admitfn" {
  source = "../../modules/gcp-function"

  project_id   = var.project_id
  region       = var.region
  name         = "admitfn-${var.cluster_name}"
  source_zip   = var.source_zip
  policies_dir = var.policies_dir
  # admitfn push publishes the bundle, with the webhook configurations
  # read below and the routes it retires kept for a transition.
  upload_policies         = false
  policy_prefix           = var.policy_prefix
  webhook_timeout_seconds = var.webhook_timeout_seconds
  timeout_seconds         = var.webhook_timeout_seconds - 2
  labels                  = { "admitfn-cluster" = var.cluster_name }

  # Cluster access: the service account may authenticate to the cluster,
  # and the function knows where it is.
  gke_access = var.cluster_access
  environment_variables = !var.cluster_access ? {} : {
    ADMITFN_CLUSTERS = jsonencode({ clusters = [{
      name                     = var.cluster_name
      server                   = "https://${data.google_container_cluster.this.endpoint}"
      certificateAuthorityData = base64decode(data.google_container_cluster.this.master_auth[0].cluster_ca_certificate)
      gke                      = {}
    }] })
  }
}

# The webhook configurations admitfn push published beside the bundle,
# covered by its manifest: one terraform apply after a push applies them.
data "google_storage_bucket_object_content" "webhooks" {
  count = var.webhooks && var.webhooks_json == null ? 1 : 0

  bucket = module.admitfn.bucket_name
  name   = "${var.policy_prefix}/.admitfn/webhooks.json"
}

module "webhook" {
  source = "../../modules/webhook"

  configurations = jsondecode(!var.webhooks ? jsonencode({ apiVersion = "v1", kind = "List", items = [] }) : coalesce(var.webhooks_json, one(data.google_storage_bucket_object_content.webhooks[*].content)))
  base_url       = module.admitfn.webhook_base_url

  cluster         = var.cluster_access ? var.cluster_name : null
  reader_role     = var.cluster_access
  reader_subjects = var.cluster_access ? [{ kind = "User", name = module.admitfn.service_account_email }] : []
}
