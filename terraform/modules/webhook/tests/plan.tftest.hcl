# Plan-only tests with a mocked provider, run by make tf-check against the
# provider's recorded schemas, on what `admitfn render` makes of the
# example bundle (terraform/examples/tests/published-webhooks.json, what admitfn push
# publishes for it, kept current by a test).

mock_provider "kubernetes" {}

run "load" {
  module {
    source = "./tests/load"
  }
  variables {
    file = "../../examples/tests/published-webhooks.json"
  }
}

variables {
  base_url = "https://abc.lambda-url.eu-west-1.on.aws/TOKEN"
}

run "rendered_examples" {
  command = plan
  variables {
    configurations = run.load.configurations
  }

  assert {
    condition     = length(kubernetes_validating_webhook_configuration_v1.this) == 1 && length(kubernetes_mutating_webhook_configuration_v1.this) == 1
    error_message = "the example bundle has one validating and one mutating configuration"
  }
  assert {
    condition     = kubernetes_validating_webhook_configuration_v1.this["admitfn"].webhook[0].client_config[0].url == "https://abc.lambda-url.eu-west-1.on.aws/TOKEN/validate/b11fbe337a"
    error_message = "webhook URLs keep their route under base_url"
  }
  assert {
    condition     = kubernetes_validating_webhook_configuration_v1.this["admitfn"].webhook[0].side_effects == "None" && kubernetes_validating_webhook_configuration_v1.this["admitfn"].webhook[0].timeout_seconds == 10
    error_message = "rendered fields are carried over"
  }
}

run "push_down" {
  command = plan
  variables {
    configurations = run.load.configurations
    push_down      = true
  }

  assert {
    condition     = length(kubernetes_validating_webhook_configuration_v1.this) == 0 && length(kubernetes_mutating_webhook_configuration_v1.this) == 0 && length(kubernetes_manifest.this) == 2
    error_message = "with push_down, the configurations are manifests"
  }
  assert {
    condition     = kubernetes_manifest.this["ValidatingWebhookConfiguration/admitfn"].manifest.webhooks[0].clientConfig.url == "https://abc.lambda-url.eu-west-1.on.aws/TOKEN/validate/b11fbe337a"
    error_message = "webhook URLs keep their route under base_url"
  }
  assert {
    condition     = length(flatten([for w in kubernetes_manifest.this["ValidatingWebhookConfiguration/admitfn"].manifest.webhooks : w.matchConditions])) == 3
    error_message = "the pushed matchConditions are installed"
  }
}

run "plain_http" {
  command = plan
  variables {
    configurations = run.load.configurations
    base_url       = "http://abc.example.com/TOKEN"
  }
  expect_failures = [var.base_url]
}
