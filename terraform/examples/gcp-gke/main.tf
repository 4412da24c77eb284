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

  project_id              = var.project_id
  region                  = var.region
  name                    = "admitfn-${var.cluster_name}"
  source_zip              = var.source_zip
  policies_dir            = var.policies_dir
  webhook_timeout_seconds = var.webhook_timeout_seconds
  timeout_seconds         = var.webhook_timeout_seconds - 2
  labels                  = { "admitfn-cluster" = var.cluster_name }
}

module "webhook" {
  source = "../../modules/webhook"

  configurations = jsondecode(file(var.webhooks_json))
  base_url       = module.admitfn.webhook_base_url
}
