// A test fixture over the cgroupfs twin (isolators/cgroupfs_twin.h): a temp
// dir that plays the cgroup mounts, the io_uring poller the isolators watch
// their events with, and the isolators a test makes. Shared by the
// isolators' and the cgroup layout's unit tests (no root needed).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "isolators/cgroupfs.h"
#include "isolators/cgroupfs_twin.h"
#include "isolators/isolator_table.h"

namespace allot {

class CgroupTwinTest : public ::testing::Test {
 public:
  // A twin file's content, or "<missing PATH>".
  static std::string read(const std::string& path) {
    auto text = cgroupfs::readFile(path);
    return text ? *text : "<missing " + path + ">";
  }

 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-cgroup-twin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs_ = std::make_shared<DirCgroupFs>(dir_);
    auto poller = UringPoller::create(io_);
    ASSERT_TRUE(poller.ok());
    poller_ = std::move(*poller);
    options_.poller = poller_.get();
  }
  void TearDown() override {
    isolators_.clear();
    std::filesystem::remove_all(dir_);
  }

  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  IsolatorOptions options_;
  std::string dir_;
  std::shared_ptr<DirCgroupFs> fs_;
  CgroupHost host_;
  std::vector<std::unique_ptr<Isolator>> isolators_;
};

}  // namespace allot
