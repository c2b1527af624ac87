# A GPU node pool for frugalrl's training and pretraining stages. Nodes carry the taint
# nvidia.com/gpu=present:NoSchedule, so only pods that tolerate it (the pipeline's GPU stages,
# through the gpu_toleration parameter) land here, and the label frugalrl.io/pool=gpu beside
# GKE's own cloud.google.com/gke-nodepool=<pool_name> (the default gpu_node_selector).
resource "google_container_node_pool" "gpu" {
  project  = var.project
  location = var.location
  cluster  = var.cluster
  name     = var.pool_name

  autoscaling {
    min_node_count = var.min_nodes
    max_node_count = var.max_nodes
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type = var.machine_type
    spot         = var.spot
    oauth_scopes = ["https://www.googleapis.com/auth/cloud-platform"]

    guest_accelerator {
      type  = var.accelerator_type
      count = var.accelerator_count
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    labels = {
      "frugalrl.io/pool" = "gpu"
    }

    taint {
      key    = "nvidia.com/gpu"
      value  = "present"
      effect = "NO_SCHEDULE"
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }
}
