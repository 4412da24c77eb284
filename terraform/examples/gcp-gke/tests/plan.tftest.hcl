# Plan-only tests with mocked providers, run by make tf-check against the
# providers' recorded schemas, with the example bundle's webhooks.

mock_provider "google" {
  mock_data "google_container_cluster" {
    defaults = { endpoint = "203.0.113.10" }
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

run "function_and_webhooks" {
  command = plan

  assert {
    condition     = module.admitfn.function_name == "admitfn-shop"
    error_message = "the function is named after the cluster"
  }
  assert {
    condition     = output.webhook_configurations == ["admitfn", "admitfn"] && module.webhook.webhooks == 6
    error_message = "the example bundle's validating and mutating configurations, with their six webhooks, go into the cluster"
  }
}
