// The `mate` program (the commands and their entry live in libmate.so: mate/cli/program.hpp).
#include <string>
#include <vector>

#include "mate/cli/program.hpp"

int main(int argc, char** argv) { return mate::cli::run_program(std::vector<std::string>(argv + 1, argv + argc)); }
