# Calls a hilo server through the generated Ruby stubs.
#
#   ruby -I build/gen/ruby examples/ruby/hilo_example.rb 127.0.0.1:50051 [COLLECTION]
#
# Uses a new collection (a unique name unless one is given), so the ranges are
# exact: 1-32, then 33-64 for a second client, 65-128 for a client that
# reports its previous range, and after handing back all of that range but
# its first number, 66-97. Each range carries a range_token (never 0); the
# return sends it and is applied, the same return sent again is refused (a
# node applies a return at most once), and a return without a token fails
# with FAILED_PRECONDITION. A bad collection name must fail with
# INVALID_ARGUMENT. Exits 1 on any difference.

require 'grpc'
require 'hilo/v1/hilo_services_pb'

def check(what, got, want)
  if got != want
    puts "FAIL #{what}: got #{got.inspect}, want #{want.inspect}"
    exit 1
  end
  puts "ok   #{what}: #{got.inspect}"
end

def bounds(range)
  [range.low, range.high]
end

if ARGV.empty?
  warn 'usage: hilo_example.rb HOST:PORT [COLLECTION]'
  exit 2
end
target = ARGV[0]
collection = ARGV[1] || "example-ruby-#{Process.pid}-#{Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)}"

stub = Hilo::V1::HiLo::Stub.new(target, :this_channel_is_insecure, timeout: 10)
next_range = lambda do |**fields|
  stub.next_range(Hilo::V1::NextRangeRequest.new(collection: collection, **fields))
end

first = next_range.call
check('first range', bounds(first), [1, 32])
check('node tag', first.node_tag, 'A')
check('range_at set', !first.range_at.nil?, true)

second = next_range.call
check('second range starts after the first', second.low, first.high + 1)
check('second range', bounds(second), [33, 64])

third = next_range.call(last_size: second.high - second.low + 1,
                        last_range_at: second.range_at,
                        last_max: second.high)
check('third range (size doubled)', bounds(third), [65, 128])

check('range_token set', third.range_token != 0, true)

# Used only 65: hand back 66-128, with the range's token.
tail = { collection: collection, end: third.high, last: third.low,
         node_tag: third.node_tag, range_token: third.range_token }
returned = stub.return_range(Hilo::V1::ReturnRangeRequest.new(**tail))
check('return of the unused tail applied', returned.applied, true)
check('max after the return', returned.max, 65)
# The token is spent: a retried or duplicated return changes nothing.
again = stub.return_range(Hilo::V1::ReturnRangeRequest.new(**tail))
check('the same return again is refused', [again.applied, again.max], [false, 65])
no_token = GRPC::Core::StatusCodes::OK
begin
  stub.return_range(Hilo::V1::ReturnRangeRequest.new(**tail, range_token: 0))
rescue GRPC::BadStatus => e
  no_token = e.code
end
check('return without a range_token', no_token,
      GRPC::Core::StatusCodes::FAILED_PRECONDITION)
check('next range continues after the return', bounds(next_range.call), [66, 97])

['', "bad\ncollection", 'x' * 257].each do |bad|
  code = GRPC::Core::StatusCodes::OK
  begin
    stub.next_range(Hilo::V1::NextRangeRequest.new(collection: bad))
  rescue GRPC::BadStatus => e
    code = e.code
  end
  check("bad collection #{bad[0, 12].inspect}", code,
        GRPC::Core::StatusCodes::INVALID_ARGUMENT)
end
puts 'ruby example: all checks passed'
