provider "aws" {
  region = var.region
}

data "aws_eks_cluster" "this" {
  name = var.cluster_name
}

data "aws_eks_cluster_auth" "this" {
  name = var.cluster_name
}

provider "kubernetes" {
  host                   = data.aws_eks_cluster.this.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.this.certificate_authority[0].data)
  token                  = data.aws_eks_cluster_auth.this.token
}

module "admitfn" {
  source = "../../modules/aws-lambda"

  name         = "admitfn-${var.cluster_name}"
  lambda_zip   = var.lambda_zip
  policies_dir = var.policies_dir
  # admitfn push publishes the bundle, with the webhook configurations
  # read below and the routes it retires kept for a transition.
  upload_policies         = false
  policy_prefix           = var.policy_prefix
  webhook_timeout_seconds = var.webhook_timeout_seconds
  timeout                 = var.webhook_timeout_seconds - 2
  tags                    = { "admitfn.io/cluster" = var.cluster_name }

  # Cluster access: the role may read the cluster, and the function knows
  # where it is and how to authenticate.
  eks_access = var.cluster_access ? [{ cluster_name = var.cluster_name }] : []
  environment_variables = !var.cluster_access ? {} : {
    ADMITFN_CLUSTERS = jsonencode({ clusters = [{
      name                     = var.cluster_name
      server                   = data.aws_eks_cluster.this.endpoint
      certificateAuthorityData = base64decode(data.aws_eks_cluster.this.certificate_authority[0].data)
      eks                      = { clusterName = var.cluster_name, region = var.region }
    }] })
  }
}

# The webhook configurations admitfn push published beside the bundle,
# covered by its manifest: one terraform apply after a push applies them.
data "aws_s3_object" "webhooks" {
  count = var.webhooks && var.webhooks_json == null ? 1 : 0

  bucket = module.admitfn.s3_bucket_id
  key    = "${var.policy_prefix}/.admitfn/webhooks.json"
}

module "webhook" {
  source = "../../modules/webhook"

  configurations = jsondecode(!var.webhooks ? jsonencode({ apiVersion = "v1", kind = "List", items = [] }) : coalesce(var.webhooks_json, one(data.aws_s3_object.webhooks[*].body)))
  base_url       = module.admitfn.webhook_base_url

  cluster         = var.cluster_access ? var.cluster_name : null
  reader_role     = var.cluster_access
  reader_subjects = var.cluster_access ? [{ kind = "Group", name = "admitfn-readers" }] : []
}
