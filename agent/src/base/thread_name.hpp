// Thread names, as `top -H`, `ps -L` and /proc/PID/task/TID/comm show them: "kiwi-collector",
// "kiwi-s:<sensor>". Cut to the kernel's 15 bytes (pthread_setname_np refuses longer ones).
#pragma once

#include <pthread.h>

#include <string>

namespace kiwi::agent {

inline void name_thread(pthread_t thread, std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(thread, name.c_str());
}

inline void name_this_thread(std::string name) {
  name_thread(pthread_self(), std::move(name));
}

}  // namespace kiwi::agent
