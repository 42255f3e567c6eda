// The search the crash handler runs without locks (a crashing thread may hold one), and
// GuardAllocator::describe() under the table's lock.
#include "guard/lookup.hpp"

namespace mate::guard {

bool find_allocation(const SlotTable& table, std::size_t granularity, std::uintptr_t address, Slot* out,
                     bool* outside) noexcept {
  bool found = false;
  std::size_t nearest_distance = 0;
  const auto keep = [&](const Slot& s, bool beyond) noexcept {
    copy_with_state(out, s);
    *outside = beyond;
    found = true;
  };
  // True (stop) when `s` holds the address; otherwise remembers it if it is the nearest yet.
  const auto consider = [&](const Slot& s) noexcept {
    if (address >= s.reservation && address - s.reservation < s.reserved()) {
      keep(s, false);
      return true;
    }
    std::size_t distance = address < s.reservation ? s.reservation - address
                                                   : address - (s.reservation + s.reserved()) + 1;
    if (distance < nearest_distance) {
      nearest_distance = distance;
      keep(s, true);
    }
    return false;
  };
  // Starts over (a few times at most) when the quarantine's ring was replaced during the search.
  for (int attempt = 0; attempt < 4; ++attempt) {
    found = false;
    nearest_distance = granularity + 1;
    bool inside = false;
    const std::uint32_t hw = table.high_water();
    for (std::uint32_t i = 0; i < hw && !inside; ++i) {
      const Slot& s = table.slot(i);
      if (static_cast<State>(s.state.load(std::memory_order_acquire)) == State::None) continue;
      inside = consider(s);
    }
    if (inside) return true;
    // Slots first: a record is published before its slot is freed (SlotTable::quarantine_push).
    if (table.quarantine().scan(consider)) return found;
  }
  return found;
}

Description describe_slot(const Slot& s, std::uintptr_t address, bool outside) noexcept {
  Description d;
  d.found = true;
  d.id = s.id();
  d.user = s.user;
  d.size = s.size;
  d.reservation = s.reservation;
  d.reserved = s.reserved();
  d.mapping = s.mapping();
  d.mapped = s.mapped();
  d.mode = s.mode;
  d.state = static_cast<State>(s.state.load(std::memory_order_acquire));
  d.outside = outside;
  if (address < s.user) {
    d.relation = Relation::BeforeStart;
    d.offset = s.user - address;
  } else if (address >= s.user + s.size) {
    d.relation = Relation::PastEnd;
    d.offset = address - (s.user + s.size);
  } else {
    d.relation = Relation::Inside;
    d.offset = address - s.user;
  }
  return d;
}

Description describe_in_table(const SlotTable& table, std::size_t granularity, std::uintptr_t address) noexcept {
  bool outside = false;
  Slot s;
  if (!find_allocation(table, granularity, address, &s, &outside)) return Description{};
  return describe_slot(s, address, outside);
}

}  // namespace mate::guard
