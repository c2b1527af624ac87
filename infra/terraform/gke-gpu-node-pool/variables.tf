variable "project" {
  description = "GCP project id"
  type        = string
}

variable "location" {
  description = "Cluster location (region or zone)"
  type        = string
}

variable "cluster" {
  description = "Name of the existing GKE cluster that runs Kubeflow Pipelines"
  type        = string
}

variable "pool_name" {
  description = "Node pool name; GKE labels its nodes cloud.google.com/gke-nodepool=<pool_name>, the pipeline's default gpu_node_selector"
  type        = string
  default     = "gpu-pool"
}

variable "machine_type" {
  description = "Machine type of the GPU nodes"
  type        = string
  default     = "n1-standard-8"
}

variable "accelerator_type" {
  description = "GPU model"
  type        = string
  default     = "nvidia-tesla-t4"
}

variable "accelerator_count" {
  description = "GPUs per node"
  type        = number
  default     = 1
}

variable "min_nodes" {
  description = "Autoscaling minimum (0: no GPU cost while idle)"
  type        = number
  default     = 0
}

variable "max_nodes" {
  description = "Autoscaling maximum"
  type        = number
  default     = 4
}

variable "spot" {
  description = "Spot VMs (cheaper; training steps retry with backoff when preempted)"
  type        = bool
  default     = true
}
