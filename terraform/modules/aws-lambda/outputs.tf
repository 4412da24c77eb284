output "webhook_base_url" {
  description = "Base URL of the webhooks, path token included: pass it to the webhook module (or `admitfn render --url`). Secret: whoever has it can call the function."
  value       = "${trimsuffix(aws_lambda_function_url.this.function_url, "/")}/${local.active_token}"
  sensitive   = true
}

output "lambda_function_url" {
  description = "The Function URL, without the token: requests to it without a token get a 404 Status."
  value       = aws_lambda_function_url.this.function_url
}

output "lambda_function_name" {
  description = "Name of the Lambda function."
  value       = aws_lambda_function.this.function_name
}

output "lambda_function_arn" {
  description = "ARN of the Lambda function."
  value       = aws_lambda_function.this.arn
}

output "lambda_role_arn" {
  description = "ARN of the function's role: the one the module created, or role_arn."
  value       = aws_lambda_function.this.role
}

output "role_policy_json" {
  description = "The permissions the function needs, as an IAM policy document: attach it to role_arn when the module creates no role."
  value       = data.aws_iam_policy_document.function.json
}

output "lambda_cloudwatch_log_group_name" {
  description = "CloudWatch log group of the function (review lines and EMF metrics)."
  value       = aws_cloudwatch_log_group.function.name
}

output "policies_location" {
  description = "Where the function reads its bundle (ADMITFN_POLICIES): `admitfn push --to` this to publish without Terraform."
  value       = local.location
}

output "s3_bucket_id" {
  description = "Name of the policy bucket."
  value       = local.bucket
}
