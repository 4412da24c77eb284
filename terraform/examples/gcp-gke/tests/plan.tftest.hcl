# Plan-only tests with mocked providers, run by make tf-check against the
# providers' recorded schemas, with the webhook configurations admitfn push
# publishes for the example bundle.

mock_provider "google" {
  mock_data "google_container_cluster" {
    defaults = { endpoint = "203.0.113.10", master_auth = [{ cluster_ca_certificate = "Y2E=", client_certificate = "", client_key = "", client_certificate_config = [] }] }
  }
  mock_resource "google_cloudfunctions2_function" {
    defaults = { url = "https://admitfn-shop-abc123-ew.a.run.app" }
  }
  mock_data "google_client_config" {
    defaults = { access_token = "ya29.token" }
  }
}
mock_provider "kubernetes" {}
mock_provider "random" {}
mock_provider "time" {}

variables {
  project_id       = "my-project"
  region           = "europe-west1"
  cluster_name     = "shop"
  cluster_location = "europe-west1"
  source_zip       = "../../modules/gcp-function/tests/fake-source.zip"
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
    condition     = module.admitfn.function_name == "admitfn-shop"
    error_message = "the function is named after the cluster"
  }
  assert {
    condition     = output.webhook_configurations == ["admitfn", "admitfn"] && module.webhook.webhooks == 6
    error_message = "the example bundle's validating and mutating configurations, with their six webhooks, go into the cluster"
  }
}

# With cluster access: the function's identity may read the cluster (cluster viewer),
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
  command = plan
  variables {
    webhooks = false
  }

  assert {
    condition     = output.webhook_configurations == [] && module.webhook.webhooks == 0
    error_message = "no webhook configuration goes into the cluster before a bundle is published"
  }
}
