# Plan-only tests with mocked providers, run by make tf-check against the
# providers' recorded schemas, with the webhook configurations admitfn push
# publishes for the example bundle.

mock_provider "aws" {
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{}" }
  }
  mock_data "aws_eks_cluster" {
    defaults = {
      endpoint              = "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com"
      certificate_authority = [{ data = "Y2E=" }]
    }
  }
  mock_resource "aws_lambda_function_url" {
    defaults = { function_url = "https://abc123.lambda-url.eu-west-1.on.aws/" }
  }
  mock_data "aws_eks_cluster_auth" {
    defaults = { token = "k8s-aws-v1.token" }
  }
}
mock_provider "kubernetes" {}
mock_provider "random" {}
mock_provider "time" {}

variables {
  region       = "eu-west-1"
  cluster_name = "shop"
  lambda_zip   = "../../modules/aws-lambda/tests/fake-lambda.zip"
}

# The webhook configurations admitfn push publishes for the example bundle,
# as a directory pushed to holds them (the bucket's are read alike).
run "load" {
  module {
    source = "../tests/load"
  }
  variables {
    file = "../tests/published-webhooks.json"
  }
}

run "function_and_webhooks" {
  command = plan
  variables {
    webhooks_json = run.load.json
  }

  assert {
    condition     = module.admitfn.lambda_function_name == "admitfn-shop"
    error_message = "the function is named after the cluster"
  }
  assert {
    condition     = output.webhook_configurations == ["admitfn", "admitfn"] && module.webhook.webhooks == 6
    error_message = "the example bundle's validating and mutating configurations, with their six webhooks, go into the cluster"
  }
}

# With cluster access: the function's identity may read the cluster (an EKS access entry),
# the reader ClusterRole is bound to it, and the webhooks call the
# cluster's URLs.
run "cluster_access" {
  command = plan
  variables {
    webhooks_json  = run.load.json
    cluster_access = true
  }

  assert {
    condition     = output.webhook_configurations == ["admitfn", "admitfn"] && module.webhook.webhooks == 6
    error_message = "the webhook configurations go into the cluster with cluster access too"
  }
}

# The first apply, before the first push: the function and its bucket, no
# webhook configuration.
run "before_the_first_push" {
  command = apply
  variables {
    webhooks = false
  }

  assert {
    condition     = output.webhook_configurations == [] && module.webhook.webhooks == 0
    error_message = "no webhook configuration goes into the cluster before a bundle is published"
  }
}

# The apply after a push: the bucket exists, so its .admitfn/webhooks.json
# is read at plan time (here one webhook, as push would publish it) and the
# configurations' keys are known.
run "from_the_bucket" {
  command = plan

  override_data {
    target = data.aws_s3_object.webhooks
    values = {
      body = <<-EOT
        {"apiVersion": "v1", "kind": "List", "items": [{
          "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
          "metadata": {"name": "admitfn", "labels": {"app.kubernetes.io/managed-by": "admitfn"}},
          "webhooks": [{
            "name": "8b3e12d787.validate.admitfn.io", "admissionReviewVersions": ["v1", "v1beta1"],
            "clientConfig": {"url": "https://admitfn.invalid/validate/8b3e12d787"},
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"], "scope": "*"}],
            "failurePolicy": "Fail", "matchPolicy": "Equivalent", "sideEffects": "None", "timeoutSeconds": 10
          }]
        }]}
      EOT
    }
  }

  assert {
    condition     = output.webhook_configurations == ["admitfn"] && module.webhook.webhooks == 1
    error_message = "the configuration published in the bucket goes into the cluster"
  }
}
