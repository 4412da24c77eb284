# Plan-only tests with mocked providers, run by make tf-check against the
# providers' recorded schemas.

mock_provider "google" {}
mock_provider "random" {}
mock_provider "time" {}

variables {
  project      = "my-project"
  region       = "europe-west1"
  source_zip   = "tests/fake-source.zip"
  policies_dir = "../../../policies/examples"
}

run "defaults" {
  command = plan

  assert {
    condition     = google_cloudfunctions2_function.this.build_config[0].runtime == "go126" && google_cloudfunctions2_function.this.build_config[0].entry_point == "Admitfn"
    error_message = "the function must build the Admitfn entry point on go126"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].min_instance_count == 1 && google_cloudfunctions2_function.this.service_config[0].timeout_seconds == 8
    error_message = "defaults: one warm instance, 8s timeout (below the webhook's 10s)"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].environment_variables["GOMEMLIMIT"] == "439MiB"
    error_message = "the Go runtime's soft memory limit must be nine tenths of the default 512M"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].environment_variables["GOMAXPROCS"] == "1"
    error_message = "512M is less than one vCPU: one P"
  }
  assert {
    condition     = google_cloud_run_service_iam_member.public.member == "allUsers" && google_cloud_run_service_iam_member.public.role == "roles/run.invoker"
    error_message = "the apiserver cannot send ID tokens: invocation must be public"
  }
  assert {
    condition     = google_storage_bucket_iam_member.read_policies.role == "roles/storage.objectViewer"
    error_message = "the function may only read the policy bucket"
  }
  assert {
    condition     = length(google_storage_bucket_object.policy) == length(module.bundle.files) && length(google_storage_bucket_object.manifest) == 1
    error_message = "every policy file and the manifest must be uploaded"
  }
  assert {
    condition     = google_storage_bucket.policies[0].versioning[0].enabled && google_storage_bucket.policies[0].uniform_bucket_level_access
    error_message = "the policy bucket must be versioned with uniform access"
  }
}

run "timeout_not_below_the_webhook" {
  command = plan
  variables {
    timeout_seconds = 12
  }
  expect_failures = [var.timeout_seconds]
}

run "old_runtime" {
  command = plan
  variables {
    runtime = "go125"
  }
  expect_failures = [var.runtime]
}

run "source_from_gcs" {
  command = plan

  variables {
    source_zip    = null
    source_bucket = "releases"
    source_object = "admitfn-gcf-source_v0.1.0.zip"
  }

  assert {
    condition     = length(google_storage_bucket.source) == 0 && google_cloudfunctions2_function.this.build_config[0].source[0].storage_source[0].bucket == "releases" && google_cloudfunctions2_function.this.build_config[0].source[0].storage_source[0].object == "admitfn-gcf-source_v0.1.0.zip"
    error_message = "a release's source zip in GCS is built as it is, with no bucket of the module's own"
  }
}
