# Plan-only tests with mocked providers, run by make tf-check against the
# providers' recorded schemas.

mock_provider "aws" {
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{}" }
  }
}
mock_provider "random" {}
mock_provider "time" {}

variables {
  lambda_zip   = "tests/fake-lambda.zip"
  policies_dir = "../../../policies/examples"
}

run "defaults" {
  command = plan

  assert {
    condition     = aws_lambda_function.this.runtime == "provided.al2023" && aws_lambda_function.this.handler == "bootstrap"
    error_message = "the function must run the bootstrap on provided.al2023"
  }
  assert {
    condition     = aws_lambda_function.this.architectures == tolist(["arm64"]) && aws_lambda_function.this.timeout == 8 && aws_lambda_function.this.memory_size == 512
    error_message = "defaults: arm64, 8s timeout (below the webhook's 10s), 512 MiB"
  }
  assert {
    condition     = aws_lambda_function_url.this.authorization_type == "NONE"
    error_message = "the apiserver cannot sign requests: the URL must be public"
  }
  assert {
    condition     = aws_lambda_permission.url.action == "lambda:InvokeFunctionUrl" && aws_lambda_permission.invoke.action == "lambda:InvokeFunction" && aws_lambda_permission.invoke.invoked_via_function_url
    error_message = "a public Function URL needs both invoke permissions"
  }
  assert {
    condition     = length(aws_s3_object.policy) == length(module.bundle.files) && length(aws_s3_object.manifest) == 1
    error_message = "every policy file and the manifest must be uploaded"
  }
  assert {
    condition     = aws_cloudwatch_log_group.function.retention_in_days == 30 && aws_lambda_function.this.logging_config[0].log_format == "JSON"
    error_message = "logs: JSON format, 30 days"
  }
  assert {
    condition     = aws_s3_bucket_versioning.policies[0].versioning_configuration[0].status == "Enabled" && aws_s3_bucket_public_access_block.policies[0].restrict_public_buckets
    error_message = "the policy bucket must be versioned and private"
  }
}

run "existing_bucket" {
  command = plan

  variables {
    create_bucket = false
    bucket_name   = "my-policies"
    policy_prefix = "clusters/prod"
  }

  assert {
    condition     = length(aws_s3_bucket.policies) == 0 && aws_lambda_function.this.environment[0].variables["ADMITFN_POLICIES"] == "s3://my-policies/clusters/prod"
    error_message = "an existing bucket is used as it is"
  }
}

run "timeout_not_below_the_webhook" {
  command = plan
  variables {
    timeout_seconds = 10
  }
  expect_failures = [var.timeout_seconds]
}

run "no_policy_files" {
  command = plan
  variables {
    policies_dir = "tests/no-policies"
  }
  expect_failures = [var.policies_dir]
}

run "zero_concurrency" {
  command = plan
  variables {
    reserved_concurrency = 0
  }
  expect_failures = [var.reserved_concurrency]
}

run "package_from_s3" {
  command = plan

  variables {
    lambda_zip = null
    s3_bucket  = "releases"
    s3_key     = "admitfn-lambda_v0.1.0_arm64.zip"
  }

  assert {
    condition     = aws_lambda_function.this.s3_bucket == "releases" && aws_lambda_function.this.s3_key == "admitfn-lambda_v0.1.0_arm64.zip" && aws_lambda_function.this.filename == null
    error_message = "a release's zip in S3 is the function's code"
  }
}

# The longest name the module takes still makes a bucket prefix the aws
# provider accepts (at most 37 characters, no capitals or underscores).
run "long_name_fits_the_bucket_prefix" {
  command = plan
  variables {
    name = "Platform_Admission_Functions_For_The_Shop_Cluster_Eu1"
  }
  assert {
    condition     = aws_s3_bucket.policies[0].bucket_prefix == "platform-admission-function-policies-" && length(aws_s3_bucket.policies[0].bucket_prefix) <= 37
    error_message = "the bucket prefix is the name lower-cased, hyphenated and cut to fit 37 characters"
  }
}

run "bucket_name_must_be_an_s3_name" {
  command = plan
  variables {
    create_bucket = false
    bucket_name   = "My_Policies"
  }
  expect_failures = [var.bucket_name]
}
