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

  name                    = "admitfn-${var.cluster_name}"
  lambda_zip              = var.lambda_zip
  policies_dir            = var.policies_dir
  webhook_timeout_seconds = var.webhook_timeout_seconds
  timeout                 = var.webhook_timeout_seconds - 2
  tags                    = { "admitfn.io/cluster" = var.cluster_name }
}

module "webhook" {
  source = "../../modules/webhook"

  configurations = jsondecode(file(var.webhooks_json))
  base_url       = module.admitfn.webhook_base_url
}
