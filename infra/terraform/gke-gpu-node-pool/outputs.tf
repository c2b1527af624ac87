output "node_selector" {
  description = "The pipeline's gpu_node_selector parameter for this pool"
  value       = { "cloud.google.com/gke-nodepool" = google_container_node_pool.gpu.name }
}

output "toleration" {
  description = "The pipeline's gpu_toleration parameter for this pool's taint"
  value       = { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" }
}
