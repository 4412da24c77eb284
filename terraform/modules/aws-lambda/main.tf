# admitfn on AWS Lambda: the function behind a public Function URL (the
# apiserver cannot sign requests), protected by an unguessable path token;
# the policy bundle in S3, uploaded in the layout the function loads.

data "aws_partition" "current" {}

locals {
  bucket   = var.create_bucket ? aws_s3_bucket.policies[0].id : var.bucket_name
  location = "s3://${local.bucket}/${var.policy_prefix}"

  # Two tokens, rotated alternately: the newer is the webhook's, the older
  # stays accepted so calls in flight during a rotation still pass.
  active_token = var.token_rotation % 2 == 0 ? random_password.token_b.result : random_password.token_a.result
  other_token  = var.token_rotation % 2 == 0 ? random_password.token_a.result : random_password.token_b.result
}

# --- path tokens: 43 characters of [A-Za-z0-9], 256 bits each

resource "random_password" "token_a" {
  length  = 43
  special = false
  keepers = { generation = floor((var.token_rotation + 1) / 2) }
}

resource "random_password" "token_b" {
  length  = 43
  special = false
  keepers = { generation = floor(var.token_rotation / 2) }
}

# --- the policy bucket

locals {
  # The provider allows a bucket_prefix of 37 characters at most (63 less
  # its 26-character suffix), and bucket names hold no capitals or
  # underscores: the function's name, made to fit.
  bucket_prefix = "${trimsuffix(substr(replace(lower(var.name), "_", "-"), 0, 27), "-")}-policies-"
}

resource "aws_s3_bucket" "policies" {
  count               = var.create_bucket ? 1 : 0
  bucket              = var.bucket_name
  bucket_prefix       = var.bucket_name == null ? local.bucket_prefix : null
  object_lock_enabled = var.object_lock_days > 0
  tags                = var.tags
}

resource "aws_s3_bucket_versioning" "policies" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.policies[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "policies" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.policies[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.bucket_kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.bucket_kms_key_arn
    }
    bucket_key_enabled = var.bucket_kms_key_arn != null
  }
}

resource "aws_s3_bucket_public_access_block" "policies" {
  count                   = var.create_bucket ? 1 : 0
  bucket                  = aws_s3_bucket.policies[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "policies" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.policies[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_object_lock_configuration" "policies" {
  count  = var.create_bucket && var.object_lock_days > 0 ? 1 : 0
  bucket = aws_s3_bucket.policies[0].id
  rule {
    default_retention {
      mode = "GOVERNANCE"
      days = var.object_lock_days
    }
  }
  depends_on = [aws_s3_bucket_versioning.policies]
}

# --- the bundle: every file, then the manifest naming their versions

module "bundle" {
  source       = "../bundle"
  policies_dir = var.policies_dir
}

resource "aws_s3_object" "policy" {
  for_each     = var.upload_policies ? module.bundle.objects : {}
  bucket       = local.bucket
  key          = "${var.policy_prefix}/${each.key}"
  source       = each.value.path
  source_hash  = each.value.sha256
  content_type = each.value.type
  tags         = var.tags

  depends_on = [aws_s3_bucket_versioning.policies, aws_s3_bucket_server_side_encryption_configuration.policies]
}

# The manifest's creation time changes only with the bundle.
resource "time_static" "bundle" {
  triggers = { fingerprint = module.bundle.fingerprint }
}

resource "aws_s3_object" "manifest" {
  count        = var.upload_policies ? 1 : 0
  bucket       = local.bucket
  key          = "${var.policy_prefix}/.admitfn/manifest.json"
  content_type = "application/json"
  content = jsonencode({
    manifest = {
      apiVersion = "admitfn.io/v1alpha1"
      kind       = "BundleManifest"
      created    = time_static.bundle.rfc3339
      # Serials only increase: functions refuse a manifest older than the
      # one they serve.
      serial = time_static.bundle.unix
      objects = [
        for f in module.bundle.files : merge(
          { key = f, size = module.bundle.objects[f].size, sha256 = module.bundle.objects[f].sha256 },
          # Pinned on a versioned bucket; S3 reports "null" without versioning.
          contains(["", "null"], aws_s3_object.policy[f].version_id) ? {} : { version = aws_s3_object.policy[f].version_id },
        )
      ]
    }
  })
  tags = var.tags
}

# --- the function

resource "aws_cloudwatch_log_group" "function" {
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.cloudwatch_logs_retention_in_days
  kms_key_id        = var.cloudwatch_logs_kms_key_id
  tags              = var.tags
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "function" {
  count                = var.create_role ? 1 : 0
  name_prefix          = "${substr(var.name, 0, 32)}-"
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  permissions_boundary = var.role_permissions_boundary
  tags                 = var.tags
}

# Reads of the policy prefix, writes of its own logs, the keys it is given
# and, in a VPC, its network interfaces: nothing else.
data "aws_iam_policy_document" "function" {
  statement {
    sid       = "ReadPolicies"
    actions   = ["s3:GetObject", "s3:GetObjectVersion"]
    resources = ["arn:${data.aws_partition.current.partition}:s3:::${local.bucket}/${var.policy_prefix}/*"]
  }
  statement {
    sid       = "ListPolicies"
    actions   = ["s3:ListBucket"]
    resources = ["arn:${data.aws_partition.current.partition}:s3:::${local.bucket}"]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${var.policy_prefix}/*"]
    }
  }
  statement {
    sid       = "WriteLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.function.arn}:*"]
  }
  dynamic "statement" {
    for_each = compact([var.bucket_kms_key_arn, var.kms_key_arn])
    content {
      sid       = "Decrypt${statement.key}"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
    }
  }
  dynamic "statement" {
    # What AWSLambdaVPCAccessExecutionRole grants.
    for_each = var.vpc_subnet_ids == null ? [] : [1]
    content {
      sid       = "NetworkInterfaces"
      actions   = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"]
      resources = ["*"]
    }
  }
}

resource "aws_iam_role_policy" "function" {
  count  = var.create_role ? 1 : 0
  role   = aws_iam_role.function[0].id
  policy = data.aws_iam_policy_document.function.json
}

resource "aws_lambda_function" "this" {
  function_name                  = var.name
  role                           = var.create_role ? aws_iam_role.function[0].arn : var.role_arn
  filename                       = var.lambda_zip
  source_code_hash               = var.lambda_zip == null ? null : filebase64sha256(var.lambda_zip)
  s3_bucket                      = var.s3_bucket
  s3_key                         = var.s3_key
  s3_object_version              = var.s3_object_version
  handler                        = "bootstrap"
  runtime                        = "provided.al2023"
  architectures                  = var.architectures
  memory_size                    = var.memory_size
  timeout                        = var.timeout
  reserved_concurrent_executions = var.reserved_concurrent_executions
  kms_key_arn                    = var.kms_key_arn
  tags                           = var.tags

  environment {
    variables = merge(
      var.environment_variables,
      {
        ADMITFN_POLICIES         = local.location
        ADMITFN_TOKENS           = "${local.active_token},${local.other_token}"
        ADMITFN_REFRESH_INTERVAL = var.refresh_interval
      },
      var.bundle_public_key == null ? {} : { ADMITFN_BUNDLE_PUBLIC_KEY = var.bundle_public_key },
    )
  }

  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.function.name
  }

  dynamic "vpc_config" {
    for_each = var.vpc_subnet_ids == null ? [] : [1]
    content {
      subnet_ids         = var.vpc_subnet_ids
      security_group_ids = var.vpc_security_group_ids
    }
  }

  # A cold start must find the bundle, and the role its permissions.
  depends_on = [aws_s3_object.manifest, aws_iam_role_policy.function]
}

resource "aws_lambda_function_url" "this" {
  function_name      = aws_lambda_function.this.function_name
  authorization_type = "NONE"
}

# A public Function URL needs both statements since October 2025.
resource "aws_lambda_permission" "url" {
  statement_id           = "AdmitfnFunctionUrl"
  action                 = "lambda:InvokeFunctionUrl"
  function_name          = aws_lambda_function.this.function_name
  principal              = "*"
  function_url_auth_type = "NONE"
}

resource "aws_lambda_permission" "invoke" {
  statement_id             = "AdmitfnInvokeViaFunctionUrl"
  action                   = "lambda:InvokeFunction"
  function_name            = aws_lambda_function.this.function_name
  principal                = "*"
  invoked_via_function_url = true
}

# --- read access to EKS clusters (ADMITFN_CLUSTERS): an access entry maps
# the function's role to groups that the reader ClusterRole is bound to in
# the cluster (the webhook module's reader_subjects). No access policy: the
# ClusterRole grants what the function reads, nothing more.

resource "aws_eks_access_entry" "function" {
  for_each = { for a in var.eks_access : a.cluster_name => a }

  cluster_name      = each.key
  principal_arn     = aws_lambda_function.this.role
  kubernetes_groups = each.value.kubernetes_groups
  type              = "STANDARD"
  tags              = var.tags
}
