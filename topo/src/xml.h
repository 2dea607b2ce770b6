#pragma once
// (being written) a small XML reader for topology files
