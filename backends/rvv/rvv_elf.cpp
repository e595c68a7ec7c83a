#include "rvv_elf.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "mblast/error.h"

namespace mblast::runner::rvv {

namespace {
template <class T>
T read_at(const std::string& img, uint64_t off, const std::string& what) {
  if (off > img.size() || img.size() - off < sizeof(T)) throw Error("ELF: truncated " + what);
  T v;
  std::memcpy(&v, img.data() + off, sizeof(T));
  return v;
}
}  // namespace

std::map<std::string, uint64_t> elf_symbol_values(const std::filesystem::path& file,
                                                  const std::vector<std::string>& names) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read " + file.string());
  const std::string img((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto eh = read_at<Elf64_Ehdr>(img, 0, "header");
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    throw Error(file.string() + " is not a little-endian ELF64 file");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) throw Error("ELF: unexpected section header size");
  std::map<std::string, uint64_t> found;
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    const auto sh = read_at<Elf64_Shdr>(img, eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), "section header");
    if (sh.sh_type != SHT_SYMTAB || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
    const auto strtab =
        read_at<Elf64_Shdr>(img, eh.e_shoff + uint64_t{sh.sh_link} * sizeof(Elf64_Shdr), "string table");
    if (strtab.sh_offset > img.size() || img.size() - strtab.sh_offset < strtab.sh_size)
      throw Error("ELF: truncated string table");
    for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); ++k) {
      const auto sym = read_at<Elf64_Sym>(img, sh.sh_offset + k * sizeof(Elf64_Sym), "symbol");
      if (sym.st_name >= strtab.sh_size || sym.st_shndx == SHN_UNDEF) continue;
      const char* s = img.data() + strtab.sh_offset + sym.st_name;
      const size_t len = strnlen(s, strtab.sh_size - sym.st_name);
      const std::string name(s, len);
      if (std::find(names.begin(), names.end(), name) != names.end()) found[name] = sym.st_value;
    }
  }
  return found;
}

}  // namespace mblast::runner::rvv
