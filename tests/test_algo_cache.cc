// AlgoCache (lib/backend/algo_cache.h): choices persist across instances (processes), merge with
// what another process saved, survive a damaged file line by line, and never fail a run.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lib/backend/algo_cache.h"
#include "tests/test_util.h"
#include "tests/warning_sink.h"

using namespace trainer;

TEST_CASE("algorithm choices persist on disk and merge with another process's", "[algo_cache]") {
  const std::string dir = test::temp_dir("algo_cache");
  const std::string path = dir + "/sub/algos.tsv";  // the folder is made on the first save
  {
    AlgoCache a(path);
    std::string v;
    CHECK_FALSE(a.get("H100 cc90 shape 1", &v));
    a.put("H100 cc90 shape 1", "1 0 2 0 3 0");
  }
  AlgoCache b(path), c(path);
  std::string v;
  REQUIRE(b.get("H100 cc90 shape 1", &v));
  CHECK(v == "1 0 2 0 3 0");
  REQUIRE(c.get("H100 cc90 shape 1", &v));  // c has loaded the file now
  b.put("shape 2", "4 0 5 0 6 0");
  c.put("shape 3\twith a tab", "7 0\n8 0");  // c merges b's entry before it saves
  AlgoCache d(path);
  REQUIRE(d.get("shape 2", &v));
  CHECK(v == "4 0 5 0 6 0");
  REQUIRE(d.get("shape 3 with a tab", &v));
  CHECK(v == "7 0 8 0");
  CHECK(d.get("H100 cc90 shape 1", &v));
}

TEST_CASE("a damaged algorithm cache is ignored line by line, and an unwritable one is only a warning",
          "[algo_cache]") {
  const std::string dir = test::temp_dir("algo_cache_bad");
  const std::string path = dir + "/algos.tsv";
  {
    std::ofstream f(path, std::ios::binary);
    f << "good key\t1 2 3\n"
      << "no tab here\n"
      << std::string("bin\0ary\tx\n", 10) << "\t\n"
      << "a\tb\tc\n";
  }
  AlgoCache a(path);
  std::string v;
  {
    test::ExpectWarning w("4 of 5 lines are not 'key<TAB>value' and were ignored");
    REQUIRE(a.get("good key", &v));
  }
  CHECK(v == "1 2 3");
  CHECK_FALSE(a.get("no tab here", &v));
  CHECK_FALSE(a.get("a", &v));
  // A path under a file (not a folder): the save fails, the run does not, the entry is kept.
  AlgoCache w(path + "/inside/algos.tsv");
  {
    test::ExpectWarning warn("the measured algorithms are not kept for the next run");
    REQUIRE_NOTHROW(w.put("k", "v"));
  }
  REQUIRE(w.get("k", &v));
  // A path that links to a device that never ends, a FIFO that blocks, a folder: ignored, not read.
  const std::string zero = dir + "/zero.tsv", fifo = dir + "/fifo.tsv";
  std::filesystem::create_symlink("/dev/zero", zero);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& p : {zero, fifo, dir}) {
    AlgoCache c(p);
    test::ExpectWarning warn("not a regular file of at most 64 MiB; ignored");
    CHECK_FALSE(c.get("k", &v));
  }
  // No path: memory only.
  AlgoCache m("");
  m.put("k", "v");
  REQUIRE(m.get("k", &v));
}

TEST_CASE("the algorithm cache's folder follows TRAINER_CACHE_DIR, XDG_CACHE_HOME and HOME", "[algo_cache]") {
  const char* saved = std::getenv("TRAINER_CACHE_DIR");
  const std::string keep = saved ? saved : "";
  setenv("TRAINER_CACHE_DIR", "/tmp/tc", 1);
  CHECK(AlgoCache::default_path("x.tsv") == "/tmp/tc/x.tsv");
  setenv("TRAINER_CACHE_DIR", "off", 1);
  CHECK(AlgoCache::default_path("x.tsv").empty());
  setenv("TRAINER_CACHE_DIR", "", 1);
  CHECK(AlgoCache::default_path("x.tsv").empty());
  unsetenv("TRAINER_CACHE_DIR");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string keep_xdg = xdg ? xdg : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  CHECK(AlgoCache::default_path("x.tsv") == "/tmp/xdg/trainer/x.tsv");
  if (xdg)
    setenv("XDG_CACHE_HOME", keep_xdg.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  if (saved) setenv("TRAINER_CACHE_DIR", keep.c_str(), 1);
}
