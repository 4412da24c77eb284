output "webhook_base_url" {
  description = "Base URL of the webhooks, path token included: pass it to the webhook module (or `admitfn render --url`). Secret: whoever has it can call the function."
  value       = "${trimsuffix(aws_lambda_function_url.this.function_url, "/")}/${local.active_token}"
  sensitive   = true
}

output "function_url" {
  description = "The Function URL, without the token: requests to it without a token get a bare 404."
  value       = aws_lambda_function_url.this.function_url
}

output "function_name" {
  description = "Name of the Lambda function."
  value       = aws_lambda_function.this.function_name
}

output "function_arn" {
  description = "ARN of the Lambda function."
  value       = aws_lambda_function.this.arn
}

output "policies_location" {
  description = "Where the function reads its bundle (ADMITFN_POLICIES): `admitfn push --to` this to publish without Terraform."
  value       = local.location
}

output "bucket" {
  description = "Name of the policy bucket."
  value       = local.bucket
}

output "log_group" {
  description = "CloudWatch log group of the function (review lines and EMF metrics)."
  value       = aws_cloudwatch_log_group.function.name
}
