# Plan-only tests with mocked providers, run by make tf-check against the
# providers' recorded schemas.

mock_provider "google" {}
mock_provider "random" {}
mock_provider "time" {}

variables {
  project_id   = "my-project"
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

# The knobs enterprises ask for, each as the resources carry it.
run "enterprise_knobs" {
  command = plan
  variables {
    available_memory              = "1Gi"
    min_instance_count            = 2
    max_instance_count            = 10
    ingress_settings              = "ALLOW_INTERNAL_AND_GCLB"
    kms_key_name                  = "projects/my-project/locations/europe-west1/keyRings/admitfn/cryptoKeys/admitfn"
    vpc_connector                 = "projects/my-project/locations/europe-west1/connectors/admitfn"
    vpc_connector_egress_settings = "ALL_TRAFFIC"
    environment_variables         = { ADMITFN_LOG_LEVEL = "debug" }
    labels                        = { team = "platform" }
  }
  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].available_memory == "1Gi" && google_cloudfunctions2_function.this.service_config[0].min_instance_count == 2 && google_cloudfunctions2_function.this.service_config[0].max_instance_count == 10 && google_cloudfunctions2_function.this.service_config[0].ingress_settings == "ALLOW_INTERNAL_AND_GCLB"
    error_message = "available_memory, the instance counts and ingress_settings reach the function"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.kms_key_name == "projects/my-project/locations/europe-west1/keyRings/admitfn/cryptoKeys/admitfn" && google_storage_bucket.policies[0].encryption[0].default_kms_key_name == "projects/my-project/locations/europe-west1/keyRings/admitfn/cryptoKeys/admitfn" && google_storage_bucket.source[0].encryption[0].default_kms_key_name == "projects/my-project/locations/europe-west1/keyRings/admitfn/cryptoKeys/admitfn"
    error_message = "the function's artifacts and both buckets are encrypted with the key"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].vpc_connector == "projects/my-project/locations/europe-west1/connectors/admitfn" && google_cloudfunctions2_function.this.service_config[0].vpc_connector_egress_settings == "ALL_TRAFFIC"
    error_message = "outbound traffic goes through the connector"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].environment_variables["ADMITFN_LOG_LEVEL"] == "debug" && startswith(google_cloudfunctions2_function.this.service_config[0].environment_variables["ADMITFN_POLICIES"], "gs://")
    error_message = "extra environment variables join the module's"
  }
  assert {
    condition     = google_cloudfunctions2_function.this.labels["team"] == "platform" && google_storage_bucket.policies[0].labels["team"] == "platform" && google_storage_bucket.source[0].labels["team"] == "platform"
    error_message = "labels reach every resource that takes them"
  }
}

run "existing_service_account" {
  command = plan
  variables {
    create_service_account = false
    service_account_email  = "admitfn@my-project.iam.gserviceaccount.com"
  }
  assert {
    condition     = length(google_service_account.function) == 0 && google_cloudfunctions2_function.this.service_config[0].service_account_email == "admitfn@my-project.iam.gserviceaccount.com" && google_storage_bucket_iam_member.read_policies.member == "serviceAccount:admitfn@my-project.iam.gserviceaccount.com"
    error_message = "an existing service account runs the function and may read the bundle"
  }
}

# Bucket names hold 63 characters at most, whatever the project and
# function names. Applied, with the mocks: Terraform leaves the random
# suffix unknown in a plan.
run "long_names_fit_the_bucket_names" {
  command = apply
  variables {
    project_id = "a-thirty-character-project-id"
    name       = "a-fifty-character-function-name-for-the-shop-clust"
  }
  override_resource {
    target = random_id.bucket
    values = { hex = "0a1b2c3d" }
  }
  assert {
    condition     = google_storage_bucket.policies[0].name == "a-thirty-character-project-id-a-fift-policies-0a1b2c3d" && google_storage_bucket.source[0].name == "a-thirty-character-project-id-a-fift-source-0a1b2c3d"
    error_message = "bucket names are cut to fit 63 characters"
  }
}

run "module_owned_environment" {
  command = plan
  variables {
    environment_variables = { GOMEMLIMIT = "1GiB" }
  }
  expect_failures = [var.environment_variables]
}

run "blank_bundle_public_key" {
  command = plan
  variables {
    bundle_public_key = " "
  }
  expect_failures = [var.bundle_public_key]
}
