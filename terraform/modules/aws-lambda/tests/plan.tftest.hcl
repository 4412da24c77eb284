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
  assert {
    condition     = length(aws_iam_role.function) == 1 && aws_iam_role.function[0].permissions_boundary == null && length(aws_lambda_function.this.vpc_config) == 0
    error_message = "defaults: a role of the module's own, no boundary, no VPC"
  }
  assert {
    condition     = keys(aws_lambda_function.this.environment[0].variables) == tolist(["ADMITFN_POLICIES", "ADMITFN_REFRESH_INTERVAL", "ADMITFN_TOKENS"])
    error_message = "the function's environment is the bundle's location, its refresh interval and the tokens"
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
    timeout = 10
  }
  expect_failures = [var.timeout]
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
    reserved_concurrent_executions = 0
  }
  expect_failures = [var.reserved_concurrent_executions]
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

# The knobs enterprises ask for, each as the resources carry it.
run "enterprise_knobs" {
  command = plan
  variables {
    architectures                     = ["x86_64"]
    timeout                           = 5
    memory_size                       = 1024
    reserved_concurrent_executions    = 20
    cloudwatch_logs_retention_in_days = 90
    cloudwatch_logs_kms_key_id        = "arn:aws:kms:eu-west-1:111122223333:key/logs"
    kms_key_arn                       = "arn:aws:kms:eu-west-1:111122223333:key/env"
    bucket_kms_key_arn                = "arn:aws:kms:eu-west-1:111122223333:key/bucket"
    role_permissions_boundary         = "arn:aws:iam::111122223333:policy/boundary"
    environment_variables             = { ADMITFN_LOG_LEVEL = "debug" }
    vpc_subnet_ids                    = ["subnet-1", "subnet-2"]
    vpc_security_group_ids            = ["sg-1"]
    tags                              = { team = "platform" }
  }
  assert {
    condition     = aws_lambda_function.this.architectures == tolist(["x86_64"]) && aws_lambda_function.this.timeout == 5 && aws_lambda_function.this.memory_size == 1024 && aws_lambda_function.this.reserved_concurrent_executions == 20
    error_message = "architectures, timeout, memory_size and reserved_concurrent_executions reach the function"
  }
  assert {
    condition     = aws_cloudwatch_log_group.function.retention_in_days == 90 && aws_cloudwatch_log_group.function.kms_key_id == "arn:aws:kms:eu-west-1:111122223333:key/logs"
    error_message = "the log group keeps 90 days, encrypted with the logs key"
  }
  assert {
    condition     = aws_lambda_function.this.kms_key_arn == "arn:aws:kms:eu-west-1:111122223333:key/env" && [for r in aws_s3_bucket_server_side_encryption_configuration.policies[0].rule : r.apply_server_side_encryption_by_default[0].kms_master_key_id] == ["arn:aws:kms:eu-west-1:111122223333:key/bucket"]
    error_message = "the environment and the bucket are encrypted with their keys"
  }
  assert {
    condition     = aws_iam_role.function[0].permissions_boundary == "arn:aws:iam::111122223333:policy/boundary"
    error_message = "the role carries the permissions boundary"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["ADMITFN_LOG_LEVEL"] == "debug" && startswith(aws_lambda_function.this.environment[0].variables["ADMITFN_POLICIES"], "s3://")
    error_message = "extra environment variables join the module's"
  }
  assert {
    condition     = aws_lambda_function.this.vpc_config[0].subnet_ids == toset(["subnet-1", "subnet-2"]) && aws_lambda_function.this.vpc_config[0].security_group_ids == toset(["sg-1"])
    error_message = "the function runs in the given subnets and security groups"
  }
  assert {
    condition     = aws_iam_role.function[0].tags["team"] == "platform" && aws_cloudwatch_log_group.function.tags["team"] == "platform" && aws_s3_bucket.policies[0].tags["team"] == "platform" && aws_lambda_function.this.tags["team"] == "platform"
    error_message = "tags reach every resource"
  }
}

run "existing_role" {
  command = plan
  variables {
    create_role = false
    role_arn    = "arn:aws:iam::111122223333:role/admitfn"
  }
  assert {
    condition     = length(aws_iam_role.function) == 0 && length(aws_iam_role_policy.function) == 0 && aws_lambda_function.this.role == "arn:aws:iam::111122223333:role/admitfn"
    error_message = "an existing role is used as it is"
  }
}

run "existing_role_needs_its_arn" {
  command = plan
  variables {
    create_role = false
  }
  expect_failures = [var.role_arn]
}

run "module_owned_environment" {
  command = plan
  variables {
    environment_variables = { ADMITFN_POLICIES = "s3://elsewhere/x" }
  }
  expect_failures = [var.environment_variables]
}

run "vpc_needs_both" {
  command = plan
  variables {
    vpc_subnet_ids = ["subnet-1"]
  }
  expect_failures = [var.vpc_security_group_ids]
}

run "blank_bundle_public_key" {
  command = plan
  variables {
    bundle_public_key = " "
  }
  expect_failures = [var.bundle_public_key]
}
