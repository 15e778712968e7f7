// Umbrella header of the checkpoint library; format: docs/checkpoint-format.md.
#pragma once

#include "checkpoint/checksum.h"
#include "checkpoint/directory.h"
#include "checkpoint/reader.h"
#include "checkpoint/retention.h"
#include "checkpoint/tools.h"
#include "checkpoint/types.h"
#include "checkpoint/writer.h"
