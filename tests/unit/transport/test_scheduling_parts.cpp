// The engine's containers: the timer heap, the slot tables and the ring buffer, checked against
// plain reference models over random operation sequences.
#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "rnic/common/ring_buffer.hpp"
#include "slot_table.hpp"
#include "timer_queue.hpp"

using namespace rnic::transport;
using rnic::common::RingBuffer;

TEST_CASE("timer queue: timers fire in deadline order, then owner, and re-arming moves them", "[engine][timers]") {
    std::vector<Timer> timers(500);
    for (uint32_t i = 0; i < timers.size(); ++i) timers[i].owner = i;
    TimerQueue q(timers.size());
    std::mt19937 rng(7);
    std::map<uint32_t, uint64_t> armed;  // the model: owner -> deadline
    for (int step = 0; step < 20000; ++step) {
        const uint32_t i = rng() % timers.size();
        switch (rng() % 4) {
            case 0:
            case 1: {
                const uint64_t d = rng() % 100000;
                q.arm(timers[i], d);
                armed[i] = d;
                break;
            }
            case 2:
                q.cancel(timers[i]);
                armed.erase(i);
                break;
            case 3: {
                const uint64_t now = rng() % 100000;
                // Everything due fires, earliest first; nothing else does.
                std::vector<std::pair<uint64_t, uint32_t>> due;
                for (auto& [owner, d] : armed)
                    if (d <= now) due.emplace_back(d, owner);
                std::sort(due.begin(), due.end());
                for (const auto& [d, owner] : due) {
                    Timer* t = q.pop_due(now);
                    REQUIRE(t != nullptr);
                    CHECK(t->owner == owner);
                    CHECK(t->deadline == d);
                    CHECK_FALSE(t->armed());
                    armed.erase(owner);
                }
                CHECK(q.pop_due(now) == nullptr);
                break;
            }
        }
        REQUIRE(q.size() == armed.size());
        if (armed.empty()) {
            REQUIRE_FALSE(q.earliest());
        } else {
            uint64_t earliest = UINT64_MAX;
            for (auto& [owner, d] : armed) earliest = std::min(earliest, d);
            REQUIRE(q.earliest() == earliest);
        }
    }
}

TEST_CASE("slot table: handles are found by index, never reused at once, and tagged by kind", "[engine][tables]") {
    struct Obj {
        int value;
    };
    SlotTable<Obj> t(64, 0x11, 24, 0);
    std::map<uint32_t, int> model;
    std::set<uint32_t> ever;
    std::mt19937 rng(3);
    for (int step = 0; step < 5000; ++step) {
        if (rng() % 2 == 0 || model.empty()) {
            const uint32_t h = t.insert(std::make_unique<Obj>(Obj{step}));
            if (model.size() == 64) {
                CHECK(h == 0);  // full
                continue;
            }
            REQUIRE(h != 0);
            CHECK(h >= 0x11);
            CHECK(h <= 0xFFFFFF);  // a QPN is 24 bits
            CHECK_FALSE(model.count(h));
            model[h] = step;
            ever.insert(h);
        } else {
            auto it = model.begin();
            std::advance(it, rng() % model.size());
            const uint32_t h = it->first;
            REQUIRE(t.remove(h) != nullptr);
            model.erase(it);
            CHECK(t.find(h) == nullptr);  // a stale handle names nothing
            CHECK(t.remove(h) == nullptr);
        }
        REQUIRE(t.size() == model.size());
        for (auto& [h, v] : model) {
            REQUIRE(t.find(h) != nullptr);
            REQUIRE(t.find(h)->value == v);
        }
    }
    // Slots come back only after every fresh one was used, each with a new generation: the
    // same handle did not come back.
    CHECK(ever.size() > 64);
    CHECK(t.find(0) == nullptr);

    SlotTable<Obj> pds(8, 1, 28, 1u << 28), cqs(8, 1, 28, 2u << 28);
    const uint32_t pd = pds.insert(std::make_unique<Obj>(Obj{1}));
    const uint32_t cq = cqs.insert(std::make_unique<Obj>(Obj{2}));
    CHECK(pds.find(pd) != nullptr);
    CHECK(cqs.find(pd) == nullptr);  // a PD handle is not a CQ handle, though both are slot 1
    CHECK(pds.find(cq) == nullptr);
}

TEST_CASE("ring buffer: a deque at both ends over one growing array", "[engine][ring]") {
    RingBuffer<int> r;
    std::deque<int> model;
    std::mt19937 rng(5);
    for (int step = 0; step < 20000; ++step) {
        switch (rng() % 5) {
            case 0:
            case 1:
                r.push_back(step);
                model.push_back(step);
                break;
            case 2:
                r.push_front(step);
                model.push_front(step);
                break;
            case 3:
                if (!model.empty()) {
                    r.pop_front();
                    model.pop_front();
                }
                break;
            case 4:
                r.erase_if([](int v) { return v % 7 == 0; });
                std::erase_if(model, [](int v) { return v % 7 == 0; });
                break;
        }
        REQUIRE(r.size() == model.size());
        if (!model.empty()) {
            REQUIRE(r.front() == model.front());
            REQUIRE(r.back() == model.back());
            REQUIRE(r[model.size() / 2] == model[model.size() / 2]);
        }
    }
    // After warming up, the same traffic reuses the array.
    const size_t capacity = r.capacity();
    for (int i = 0; i < 100000; ++i) {
        r.push_back(i);
        r.pop_front();
    }
    CHECK(r.capacity() == capacity);
}
