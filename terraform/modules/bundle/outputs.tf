output "files" {
  description = "Keys of the bundle's files, sorted."
  value       = local.files
}

output "objects" {
  description = "Each file by key: its local path, SHA-256 (hex), size in bytes and content type."
  value       = local.objects
}

output "fingerprint" {
  description = "SHA-256 over the keys and digests: changes exactly when the bundle does."
  value       = sha256(join("", [for f in local.files : "${local.objects[f].sha256}  ${f}\n"]))
}
