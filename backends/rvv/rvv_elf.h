// Reads symbol addresses from a riscv64 program's ELF symbol table (the runner needs the
// addresses of the region markers to tell the QEMU plugin which ones to honour).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mblast::runner::rvv {

// The values of the named symbols found in the .symtab of a little-endian ELF64 file; names
// not found are absent. Throws Error when the file cannot be read or is not ELF64.
std::map<std::string, uint64_t> elf_symbol_values(const std::filesystem::path& file,
                                                  const std::vector<std::string>& names);

}  // namespace mblast::runner::rvv
