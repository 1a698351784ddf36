// Everything a plugin needs: include this one header.
// Ownership and thread class: see each included header.
#pragma once
#include "context.hpp"
#include "dtype.hpp"
#include "graph.hpp"
#include "kernel_cache.hpp"
#include "kernel_registry.hpp"
#include "plugin.hpp"
#include "status.hpp"
#include "tensor.hpp"
